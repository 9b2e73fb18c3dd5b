"""The parts every benchmark shares: its command line, timing against a baseline run in the
same process, and its Markdown table.

A benchmark is a module of this package with a docstring (its first line is the summary
`--list` shows), `add_arguments(parser)` and `run(args) -> list[Table]`. It prints its
progress as it goes; the harness prints its tables at the end (`--table FILE` also writes
them, with the command and the machine, as docs/benchmarks.md shows them). The machine is
usually shared, so a benchmark measures ratios: every setting and its baseline in one
process, in alternating rounds (`alternate`), so that a change of load hits all of them.
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import shlex
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Protocol, TypeVar, cast

from flatscore.report.markdown_table import table_lines

ROOT = Path(__file__).resolve().parents[1]
"""The repository: benchmarks read its fixtures, examples and test helpers."""

T = TypeVar("T")

BENCHMARKS: dict[str, str] = {
    "tau2-import-memory": "Peak memory of `flatscore import tau2` on large generated τ² files.",
    "input-guard": "Cost of the streaming depth guard on a τ² import, as a ratio.",
    "inspect-import-memory": "Peak memory and time of `flatscore import inspect` on large "
    "Inspect logs.",
    "analysis-speed": "How fast `analyze` is at paper scale.",
    "report-size": "Report size and render time against study size.",
    "report-vs-analyze": "`flatscore report` against `flatscore analyze` on the same runs, in "
    "one process.",
    "local-backend": "Local backend speed: decode by batch size, episodes per hour by concurrency.",
    "compute": "The local backend's compute settings (bf16, fp16) against fp32, in one process.",
    "single-stream": "One sequence alone: the engine padded to 16 rows vs unpadded.",
    "gguf-single-stream": "One stream, the same GGUF: llama.cpp vs the engine.",
    "one-row-linears": "One decode step's linear layers for one row, by weight format.",
    "gguf-batch": "Episodes per hour, llama.cpp's batch engine vs flatscore's, by episodes "
    "in flight.",
    "shared-prefix": "The shared system turn read in place vs copied into each sequence's cache.",
    "arm-cost": "What each embedded arm costs to serve in-process.",
    "arm-agreement": "How far each arm's next-token decisions move from the reference's.",
    "toolchain-agreement": "flatscore's hand-written arms held against llm-compressor's "
    "checkpoints of the same weights.",
    "gguf-fidelity": "GGUF files run by llama.cpp beside the in-process arms, against the "
    "torch reference.",
    "load-memory": "Resident memory of loading the demo's arms.",
    "demo-memory": "Where the demo's memory goes.",
    "demo-timing": "Time `flatscore demo` and break the time down per arm and domain.",
    "demo-throughput": "Episodes per hour of the demo's slice at its KV memory bound against "
    "no bound, in one process.",
    "engine-admission": "The batch engine's admission under a KV budget, replayed from the demo "
    "slice's token counts.",
    "embedded-study-timing": "Episodes per hour of the embedded study's arms and the "
    "study's projected duration.",
    "base-models": "The two shipped base models side by side: cost to train and to run.",
    "train-step": "Seconds per LoRA training step of the embedded agent.",
    "tau2-live": "τ²-bench run live by flatscore: what it costs besides the model.",
    "peer-comparison": "flatscore's verdicts beside its peers', per study, domain and arm.",
    "real-failures": "Error rates of `flatscore analyze` on studies resampled from the "
    "committed archives.",
    "suite-seconds": "Seconds per test file of the fast suite, for tests/conftest.py's "
    "`LONGEST_FIRST`.",
}
"""Every benchmark: its name (`python -m benchmarks NAME`; the module is the name with
`_` for `-`) and its summary, listed without importing any (torch is slow to import)."""


@dataclass
class Table:
    """One Markdown table of results, with an optional title line and notes under it."""

    header: Sequence[str]
    rows: Sequence[Sequence[object]] = ()
    align: str = "l"
    title: str = ""
    notes: list[str] = field(default_factory=list)

    def markdown(self) -> str:
        lines = [self.title, ""] if self.title else []
        lines += table_lines(self.header, self.rows, self.align)
        for note in self.notes:
            lines += ["", note]
        return "\n".join(lines)


class Benchmark(Protocol):
    __doc__: str | None

    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> list[Table]: ...


def tests_on_path() -> None:
    """Make tests/'s helpers importable (the scripted endpoint is a test helper)."""
    tests = str(ROOT / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)


def timed(fn: Callable[[], T]) -> tuple[float, T]:
    """(wall seconds, result) of one call."""
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def alternate(
    settings: Mapping[str, Callable[[], T]], rounds: int, *, reverse: bool = True
) -> dict[str, list[T]]:
    """Each setting's results over `rounds` rounds, every setting once a round; with
    `reverse`, every other round runs them in reverse order (the one that runs first does
    not always pay for a rising load)."""
    names = list(settings)
    out: dict[str, list[T]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[::-1] if reverse and r % 2 else names:
            out[name].append(settings[name]())
    return out


def ratio(value: float, base: float) -> str:
    """`value / base` as a table cell ("1.38×")."""
    return f"{value / base:.2f}×" if base else "-"


def machine() -> str:
    """The machine a table was measured on: CPU, cores, load, Python and torch."""
    cpu = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    parts = [cpu, f"{os.cpu_count()} cores", f"Python {platform.python_version()}"]
    if "torch" in sys.modules:
        parts.append(f"torch {sys.modules['torch'].__version__}")
    if hasattr(os, "getloadavg"):
        parts.append(f"load average {os.getloadavg()[0]:.1f}")
    return ", ".join(parts)


def module_name(name: str) -> str:
    return name.replace("-", "_")


def load(name: str) -> Benchmark:
    """The benchmark's module (imported now, with whatever it imports)."""
    module: ModuleType = importlib.import_module(f"benchmarks.{module_name(name)}")
    return cast(Benchmark, module)


def parser_for(name: str, bench: Benchmark) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"python -m benchmarks {name}",
        description=bench.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    bench.add_arguments(parser)
    parser.add_argument(
        "--table",
        type=Path,
        metavar="FILE",
        help="also write the Markdown tables there, under the command and the machine",
    )
    return parser


def run(name: str, argv: Sequence[str]) -> list[Table]:
    """Parse `argv` for benchmark `name`, run it, print its tables (and write `--table`).
    Third-party warnings and progress bars are silenced, as in the CLI."""
    from flatscore.console import quiet_third_party

    quiet_third_party()
    bench = load(name)
    parser = parser_for(name, bench)
    if getattr(bench, "PASS_UNKNOWN", False):  # options it hands on (demo-timing: the demo's)
        args, extra = parser.parse_known_args(list(argv))
        args.extra = extra
    else:
        args = parser.parse_args(list(argv))
    tables = bench.run(args)
    text = "\n\n".join(t.markdown() for t in tables)
    print("\n" + text)
    if args.table is not None:
        command = shlex.join(["python", "-m", "benchmarks", name, *without_table(argv)])
        header = f"`{command}`\n\nMeasured on {machine()}."
        args.table.write_text(f"{header}\n\n{text}\n", encoding="utf-8")
        print(f"wrote {args.table}")
    return tables


def without_table(argv: Sequence[str]) -> list[str]:
    """The options as the command to show: `--table FILE` left out."""
    shown: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--table":
            skip = True
        elif not arg.startswith("--table="):
            shown.append(arg)
    return shown


def listing() -> str:
    width = max(len(n) for n in BENCHMARKS)
    return "\n".join(f"{name:<{width}}  {summary}" for name, summary in BENCHMARKS.items())


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    usage = "python -m benchmarks (--list | NAME [options] | NAME --help)"
    if not argv or argv[0] in ("-h", "--help"):
        print(f"usage: {usage}\n\n{(sys.modules['benchmarks'].__doc__ or '').strip()}")
        print(f"\nbenchmarks:\n{listing()}")
        return 0
    if argv[0] == "--list":
        print(listing())
        return 0
    name = argv[0].replace("_", "-")
    if name not in BENCHMARKS:
        print(f"error: no benchmark {argv[0]!r}; `python -m benchmarks --list`", file=sys.stderr)
        return 2
    run(name, argv[1:])
    return 0
