"""Peak memory of `flatscore import tau2` on large generated τ² files.

Published τ² results are hundreds of MB because every provider response is kept in
`raw_data`. The importer streams them, so its peak RSS must not grow with the file: the
target is < 500 MB for a 1 GB file. This script writes realistic files (simulations copied
from a fixture written by τ²-bench itself, with messages repeated and `raw_data` inflated to
the size of real provider responses), imports each with the real CLI in a child process, and
reads the child's peak RSS from `os.wait4` (ru_maxrss). A child importing the small fixture
itself is the baseline. Generated files are deleted afterwards unless --keep.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import ROOT, Table

FIXTURE = ROOT / "tests" / "fixtures" / "tau2" / "v1.0" / "ok.json"
CLI = [sys.executable, "-c", "from flatscore.cli import main; main()"]
TARGET_MB = 500


def _logprobs(kb: int) -> list[dict[str, Any]]:
    """Per-token logprobs with top-5 alternatives, as vLLM/OpenAI return them (~kb KiB)."""
    entry = {
        "token": "tok",
        "logprob": -0.0123,
        "bytes": [116, 111, 107],
        "top_logprobs": [{"token": f"t{k}", "logprob": -1.5 * k, "bytes": [116]} for k in range(5)],
    }
    size = len(json.dumps(entry, indent=2))
    return [entry] * max(1, kb * 1024 // size)


def simulation_template(repeat: int, raw_kb: int) -> str:
    """One τ² simulation as JSON text, with `@ID@`/`@TRIAL@` placeholders to fill per copy."""
    data = json.loads(FIXTURE.read_text(encoding="utf-8"))
    sim = data["simulations"][0]
    body = sim["messages"][1:-1]  # everything between the greeting and the user's stop
    messages = [sim["messages"][0]]
    for r in range(repeat):
        for m in copy.deepcopy(body):
            if m.get("role") == "tool":
                m["id"] = f"{m['id']}_{r}"
            for tc in m.get("tool_calls") or []:
                tc["id"] = f"{tc['id']}_{r}"
            if m.get("raw_data"):
                # a provider response of realistic size and shape: per-token logprobs
                m["raw_data"]["choices"][0]["logprobs"] = {"content": _logprobs(raw_kb)}
            messages.append(m)
    messages.append(sim["messages"][-1])
    sim["messages"] = messages
    sim["id"] = "@ID@"
    sim["trial"] = "@TRIAL@"
    text = json.dumps(sim, indent=2)
    return text.replace('"@TRIAL@"', "@TRIAL@")


def write_big_file(path: Path, size_mb: int) -> int:
    """Write a τ² v1 results file of about `size_mb` MB, streaming; returns simulations."""
    data = json.loads(FIXTURE.read_text(encoding="utf-8"))
    template = simulation_template(repeat=10, raw_kb=8)
    n = max(1, (size_mb * 1024 * 1024) // len(template))
    with path.open("w", encoding="utf-8") as fh:
        fh.write('{\n  "timestamp": ' + json.dumps(data["timestamp"]))
        fh.write(',\n  "info": ' + json.dumps(data["info"], indent=2))
        fh.write(',\n  "tasks": ' + json.dumps(data["tasks"], indent=2))
        fh.write(',\n  "simulations": [\n')
        for i in range(n):
            if i:
                fh.write(",\n")
            fh.write(template.replace("@ID@", f"sim-{i:07d}").replace("@TRIAL@", str(i)))
        fh.write('\n  ],\n  "simulation_index": null\n}\n')
    return n


def run_child(args: list[str]) -> tuple[int, float, float]:
    """Run a child; return (exit code, wall seconds, peak RSS in MB of that child alone)."""
    start = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0 and proc.stderr is not None:
        sys.stderr.write(proc.stderr.read().decode())
    return proc.returncode, wall, usage.ru_maxrss / 1024  # Linux reports KiB


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sizes-mb", type=int, nargs="+", default=[100, 1024])
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--keep", action="store_true", help="keep the generated files")


def run(args: argparse.Namespace) -> list[Table]:

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        base_out = Path(tmp) / "baseline.jsonl"
        _, _, base_rss = run_child(
            [*CLI, "import", "tau2", str(FIXTURE), "--arm", "b", "--out", str(base_out)]
        )
        print(f"baseline (importing the 37 kB fixture): peak RSS {base_rss:.0f} MB")
        for size_mb in args.sizes_mb:
            src = Path(tmp) / f"tau2_{size_mb}mb.json"
            out = Path(tmp) / f"run_{size_mb}mb.jsonl"
            t0 = time.perf_counter()
            n = write_big_file(src, size_mb)
            gen_s = time.perf_counter() - t0
            file_mb = src.stat().st_size / 1e6
            code, wall, rss = run_child(
                [*CLI, "import", "tau2", str(src), "--arm", "bench", "--out", str(out)]
            )
            row = {
                "file_mb": round(file_mb),
                "simulations": n,
                "exit": code,
                "import_s": round(wall, 1),
                "mb_per_s": round(file_mb / wall, 1),
                "peak_rss_mb": round(rss),
                "over_baseline_mb": round(rss - base_rss),
                "out_mb": round(out.stat().st_size / 1e6, 1) if out.exists() else None,
                "generate_s": round(gen_s, 1),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
            if args.keep:
                kept = args.workdir / src.name
                src.replace(kept)
                print(f"kept {kept}")
            else:
                src.unlink()
    worst = max(r["peak_rss_mb"] for r in rows)
    verdict = "PASS" if worst < TARGET_MB and all(r["exit"] == 0 for r in rows) else "FAIL"
    header = ["file", "simulations", "import s", "MB/s", "peak RSS MB", "over baseline MB"]
    fixture = f"{FIXTURE.stat().st_size / 1e3:.0f} kB fixture (baseline)"
    sims = len(json.loads(FIXTURE.read_text(encoding="utf-8"))["simulations"])
    cells: list[list[object]] = [[fixture, sims, "-", "-", f"{base_rss:.0f}", "-"]]
    cells += [
        [
            f"{r['file_mb']:,} MB",
            f"{r['simulations']:,}",
            r["import_s"],
            r["mb_per_s"],
            r["peak_rss_mb"],
            f"+{r['over_baseline_mb']}",
        ]
        for r in rows
    ]
    note = f"{verdict}: worst peak RSS {worst} MB (target < {TARGET_MB} MB)."
    return [Table(header, cells, "r", notes=[note])]
