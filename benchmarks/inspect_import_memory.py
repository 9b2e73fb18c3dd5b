"""Peak memory and time of `flatscore import inspect` on large Inspect logs.

The importer reads one sample at a time (a `.eval` zip member through Inspect's reader; a
`.json` log streamed with ijson), so its peak RSS should not grow with the number of
samples. This benchmark copies the samples of the fixture Inspect itself wrote
(tests/fixtures/inspect/orders.eval) under new ids into logs of N samples, writes each in both
formats with Inspect's `write_eval_log`, imports each with the real CLI in a child process and
reads the child's peak RSS from `os.wait4` (ru_maxrss). The logs are written in a separate
process, so the parent stays small. Needs the `inspect` extra.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness import ROOT, Table

FIXTURE = ROOT / "tests" / "fixtures" / "inspect" / "orders.eval"
CLI = [sys.executable, "-c", "from flatscore.cli import main; main()"]


def write_logs(n: int, workdir: Path) -> list[Path]:
    """Logs of `n` samples (the fixture's, renamed), as `.eval` and `.json`."""
    from inspect_ai.log import read_eval_log, write_eval_log

    log = read_eval_log(str(FIXTURE))
    base = log.samples or []
    samples = []
    for i in range(n):
        s = base[i % len(base)].model_copy(deep=True)
        s.id, s.epoch = f"{s.id}-{i // len(base)}", s.epoch
        samples.append(s)
    log.samples = samples
    log.eval.dataset.sample_ids = list(dict.fromkeys(s.id for s in samples))
    log.eval.dataset.samples = len(log.eval.dataset.sample_ids)
    paths = [workdir / f"n{n}.eval", workdir / f"n{n}.json"]
    for p in paths:
        write_eval_log(log, str(p))
    return paths


def import_peak(path: Path, out: Path) -> tuple[float, float]:
    """(peak RSS in MB, wall seconds) of one CLI import in a child process."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [*CLI, "import", "inspect", str(path), "--out", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        err = proc.stderr.read().decode() if proc.stderr else ""
        raise SystemExit(f"import of {path} failed: {err}")
    return usage.ru_maxrss / 1024, wall


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--samples", type=int, nargs="+", default=[60, 1200])
    parser.add_argument("--workdir", type=Path, default=None)


def run(args: argparse.Namespace) -> list[Table]:
    rows: list[list[object]] = []
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        work = Path(tmp)
        spawn = multiprocessing.get_context("spawn")
        for n in args.samples:
            # Written in a fresh process: a child forked from a parent that held the log
            # would count the parent's pages in its own peak RSS.
            with spawn.Pool(1) as pool:
                paths = pool.apply(write_logs, (n, work))
            for path in paths:
                out = work / f"{path.name}.jsonl"
                peak, wall = import_peak(path, out)
                size = path.stat().st_size / 2**20
                rows.append([n, path.suffix, f"{size:.1f}", f"{peak:.0f}", f"{wall:.1f}"])
                print(*rows[-1], flush=True)
                out.unlink()
    return [Table(["samples", "format", "file MB", "peak RSS MB", "wall s"], rows, "r")]
