"""Runs many `flatscore` command lines in one process, the way the console script does, under
an address-space cap, with a per-command time limit; prints one JSON result per command.

Usage: python cli_worker.py JOBS.json MEMORY_BYTES TIMEOUT_S  (JOBS: [{"id", "argv"}, …])
Run as a subprocess so that the cap (RLIMIT_AS) and a crash stay out of the test runner.
"""

from __future__ import annotations

import io
import json
import resource
import signal
import sys
import time
import traceback
from typing import Any


class Hang(BaseException):
    """Raised by the alarm: the command ran past its time limit."""


def _alarm(_signum: int, _frame: Any) -> None:
    raise Hang()


def invoke(main: Any, argv: list[str], timeout_s: float) -> dict[str, Any]:
    out, err = io.StringIO(), io.StringIO()
    saved = sys.stdout, sys.stderr, sys.argv
    sys.stdout, sys.stderr, sys.argv = out, err, ["flatscore", *argv]
    code: int | str = 0
    start = time.perf_counter()
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except Hang:
        code = "hang"
    except BaseException:  # a traceback: exactly what must never happen
        code = 1
        err.write(traceback.format_exc())
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        sys.stdout, sys.stderr, sys.argv = saved
    return {
        "code": code,
        "stdout": out.getvalue(),
        "stderr": err.getvalue(),
        "seconds": time.perf_counter() - start,
    }


def main() -> None:
    jobs_path, memory, timeout_s = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    signal.signal(signal.SIGALRM, _alarm)
    from flatscore.cli import main as flatscore_main

    with open(jobs_path, encoding="utf-8") as fh:
        jobs = json.load(fh)
    results = []
    for job in jobs:
        print(f"running {job['id']}: {job['argv']}", file=sys.__stderr__, flush=True)
        result = invoke(flatscore_main, job["argv"], timeout_s)
        results.append({"id": job["id"], **result})
    json.dump({"results": results, "peak_rss_kb": peak_rss_kb()}, sys.__stdout__)


def peak_rss_kb() -> int:
    """This process's own peak RSS. (`ru_maxrss` survives exec on Linux, so after a fork of
    a big test runner it reports the parent's size; VmHWM belongs to the new image.)"""
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


if __name__ == "__main__":
    main()
