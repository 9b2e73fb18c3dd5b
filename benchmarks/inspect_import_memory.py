"""Peak memory and time of `flatscore import inspect` on large Inspect logs (`.eval`, `.json`).

The importer reads one sample at a time (a `.eval` zip member through Inspect's reader; a
`.json` log streamed with ijson), so its peak RSS should not grow with the number of
samples. This script copies the samples of the fixture Inspect itself wrote
(tests/fixtures/inspect/orders.eval) under new ids into logs of N samples, writes each in both
formats with Inspect's `write_eval_log`, imports each with the real CLI in a child process and
reads the child's peak RSS from `os.wait4` (ru_maxrss). The logs are written in a separate
process, so the parent stays small. Needs the `inspect` extra.

Run: .venv/bin/python benchmarks/inspect_import_memory.py [--samples 60 1200] [--workdir /tmp]
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

from flatscore.analysis.markdown_table import row, table_lines

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "inspect" / "orders.eval"
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
        raise SystemExit(f"import of {path} failed: {proc.stderr.read() if proc.stderr else ''}")
    return usage.ru_maxrss / 1024, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, nargs="+", default=[60, 1200])
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        work = Path(tmp)
        header = ["samples", "format", "file MB", "peak RSS MB", "wall s"]
        print("\n".join(table_lines(header, [], "l")))
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
                print(row([n, path.suffix, f"{size:.1f}", f"{peak:.0f}", f"{wall:.1f}"]))
                out.unlink()


if __name__ == "__main__":
    main()
