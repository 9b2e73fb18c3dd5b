"""Cost of the streaming depth guard on a τ² import, as a ratio.

The guard is `flatscore.store.inputs`. Imports the same generated τ² file with the guard
and with it switched off (the parser reading the file directly), alternating, in one
process, and reports the best time of each. The file: the 37 kB v1.0 fixture's simulations
repeated to ~SIZE MB (`--mb`).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import flatscore.formats.tau2 as tau2
from benchmarks.harness import ROOT, Table, alternate, ratio
from flatscore.formats.tau2_import import import_tau2
from flatscore.store.inputs import open_json, open_regular

FIXTURE = ROOT / "tests" / "fixtures" / "tau2" / "v1.0" / "ok.json"


def make_file(path: Path, mb: int) -> None:
    data = json.loads(FIXTURE.read_text(encoding="utf-8"))
    sims = data["simulations"]
    per = len(json.dumps(sims[0], indent=2))
    copies = []
    for i in range(max(1, mb * 1_000_000 // per)):
        sim = dict(sims[i % len(sims)])
        sim["id"], sim["trial"] = f"sim-{i}", i
        copies.append(sim)
    data["simulations"] = copies
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")


def timed(src: Path, work: Path, guarded: bool) -> float:
    tau2.open_json = open_json if guarded else open_regular  # type: ignore[assignment]
    out = work / f"out-{guarded}-{time.monotonic_ns()}.jsonl"
    start = time.perf_counter()
    import_tau2([src], out, arm="a")
    elapsed = time.perf_counter() - start
    out.unlink()
    return elapsed


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--mb", type=int, default=64)
    parser.add_argument("--reps", type=int, default=3)


def run(args: argparse.Namespace) -> list[Table]:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        src = work / "big.json"
        make_file(src, args.mb)
        size = src.stat().st_size / 1e6
        times = alternate(
            {
                "without the guard": lambda: timed(src, work, False),
                "with the guard": lambda: timed(src, work, True),
            },
            args.reps,
            reverse=False,
        )
    best = {name: min(t) for name, t in times.items()}
    base = best["without the guard"]
    rows: list[list[object]] = [
        [name, f"{s:.2f}", f"{size / s:.0f}", ratio(s, base)] for name, s in best.items()
    ]
    title = f"a {size:.0f} MB τ² file, best of {args.reps} alternating rounds"
    return [Table(["import", "s", "MB/s", "time vs without"], rows, "lr", title=title)]
