"""Episodes per hour of the demo's slice at its KV memory bound against no bound, in one process.

The demo (`flatscore demo`, `flatscore.run.reproduce`) plays study v2's slice with each
arm's KV held to `kv_memory_mb` (427 MiB: the sequences in flight and the prefix store
together; ref and ref-planted share one engine and their two budgets, `--engine-per-arm`
gives every arm its own). This runs that slice — the demo's own study, its arms, tasks and
engines — with the bound and with the same engines unbounded (`kv_budget` None: 16
sequences an arm, the prefix store at its own 32,768 positions), in alternating rounds in
one process, so a change of load hits both. Each round starts with empty prefix stores.

Per round: wall seconds and the process's CPU seconds (on a shared host, CPU is the fairer
clock), episodes per hour of each, and where the time goes in the engines: forward passes,
sequences a pass (every pass is padded to 16 rows, so a pass with 4 sequences costs about
what one with 16 does) and prompt tokens encoded (a conversation whose cached turn was
evicted is encoded again); and the process's peak resident memory after the round (the
bound's first round runs first, so its figure is the models' and the bounded run's).
Every round's episodes are compared with study v2's archive: the bound may change speed
only, never a token.

`--tasks N` runs a stratified part of the slice (retail and telecom alternately): the
whole slice is 45 episodes at about 30 CPU-s each.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path
from typing import Any

from benchmarks.harness import ROOT, Table, alternate, ratio
from flatscore.run.arm_backend import arm_backend
from flatscore.run.reproduce import (
    SLICE_ARMS,
    SLICE_CONCURRENCY,
    SLICE_KV_MEMORY_MB,
    V2_ARCHIVE,
    check_adapter,
    live_episodes,
    slice_study,
    slice_task_ids,
)

BOUNDED, FREE = "bound", "no bound"


def part_of_slice(n: int | None) -> list[str]:
    """The first `n` tasks of the slice taken from retail and telecom alternately (all when
    None): a part keeps both domains."""
    ids = slice_task_ids()
    if n is None or n >= len(ids):
        return ids
    retail = [i for i in ids if not _is_telecom(i)]
    telecom = [i for i in ids if _is_telecom(i)]
    mixed = [i for pair in zip_longest(retail, telecom) for i in pair if i is not None]
    return mixed[:n]


def _is_telecom(task_id: str) -> bool:
    from flatscore.domains import get_domain

    return task_id in {t.id for t in get_domain("telecom").tasks("test")}


def engines() -> list[Any]:
    """The batch engines of the loaded local backends."""
    from flatscore.models.local import LocalBackend
    from flatscore.models.shared import BACKENDS

    return [b.engine for b in BACKENDS.made() if isinstance(b, LocalBackend)]


@contextmanager
def unbounded() -> Iterator[None]:
    """The loaded engines without their KV budget (as `kv_memory_mb: None` builds them),
    then as they were."""
    saved = [(e, e.kv_budget, e.store.max_tokens) for e in engines()]
    for engine, _, _ in saved:
        engine.kv_budget = None
        engine.store.max_tokens = STORE_TOKENS
    try:
        yield
    finally:
        for engine, budget, store in saved:
            engine.kv_budget, engine.store.max_tokens = budget, store


STORE_TOKENS = 32_768  # LocalBackend's `cache_tokens`: the prefix store with no KV bound


@dataclass
class Round:
    setting: str
    episodes: int
    wall_s: float
    cpu_s: float
    passes: int
    sequence_passes: int
    encoded: int
    peak_active: int
    identical: int
    checked: int
    peak_rss_mib: float

    @property
    def per_hour(self) -> float:
        return self.episodes / self.wall_s * 3600

    @property
    def per_cpu_hour(self) -> float:
        return self.episodes / self.cpu_s * 3600


def play(args: argparse.Namespace, study: Any, setting: str, counter: list[int]) -> Round:
    from flatscore.report.reproduction import reproduction_headline
    from flatscore.run.driver import run_study
    from flatscore.store.compare import reproduce

    counter[0] += 1
    out = args.out / f"{counter[0]:02d}-{setting.replace(' ', '-')}"
    shutil.rmtree(out, ignore_errors=True)
    study = study.model_copy(update={"output": str(out)})
    loaded = engines()
    for engine in loaded:  # every round starts cold
        engine.clear()
        engine.peak_active = 0
    before = [(e.steps, e.sequence_passes, e.encoded_tokens) for e in loaded]
    cpu0 = _cpu()
    started = time.perf_counter()
    with unbounded() if setting == FREE else _nothing():
        run_study(study, progress=False, report=False)
    wall = time.perf_counter() - started
    cpu = _cpu() - cpu0
    loaded = engines()  # the first round loads the models (not timed: see `run`)
    before += [(0, 0, 0)] * (len(loaded) - len(before))
    deltas = [
        (e.steps - s, e.sequence_passes - q, e.encoded_tokens - t)
        for e, (s, q, t) in zip(loaded, before, strict=True)
    ]
    live = live_episodes(out / "runs")
    check = reproduce(live, ROOT / V2_ARCHIVE)
    result = Round(
        setting=setting,
        episodes=len(live),
        wall_s=wall,
        cpu_s=cpu,
        passes=sum(d[0] for d in deltas),
        sequence_passes=sum(d[1] for d in deltas),
        encoded=sum(d[2] for d in deltas),
        peak_active=max((e.peak_active for e in loaded), default=0),
        identical=check.identical,
        checked=check.checked,
        peak_rss_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    )
    print(
        f"{setting}: {result.episodes} episodes, {wall:.0f} s wall, {cpu:.0f} CPU-s, "
        f"{result.sequence_passes / max(1, result.passes):.2f} sequences a pass, "
        f"{reproduction_headline(check)}",
        flush=True,
    )
    return result


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def load_models(study: Any) -> None:
    """Load every arm's backend before any round is timed (AWQ calibration included)."""
    from flatscore.models.shared import get_backend

    model = study.models[0]
    for arm in model.arms:
        spec = arm_backend(model, arm)
        if spec is not None:
            get_backend(spec)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=Path("/tmp/demo-throughput"))
    parser.add_argument("--tasks", type=int, help="a stratified part of the slice's 15 tasks")
    parser.add_argument("--arms", default=",".join(SLICE_ARMS))
    parser.add_argument("--rounds", type=int, default=2, help="rounds of each setting")
    parser.add_argument("--concurrency", type=int, default=SLICE_CONCURRENCY)
    parser.add_argument("--kv-memory-mb", type=float, default=SLICE_KV_MEMORY_MB)
    parser.add_argument(
        "--engine-per-arm",
        action="store_true",
        help="an engine and a copy of the weights for every arm, instead of the demo's one "
        "engine for the arms that share weights (ref, ref-planted) with their budgets' sum",
    )


def summary_rows(results: dict[str, list[Round]]) -> list[list[object]]:
    rows: list[list[object]] = []
    for setting, rounds in results.items():
        for i, r in enumerate(rounds, 1):
            rows.append(
                [
                    setting,
                    i,
                    r.episodes,
                    f"{r.wall_s:,.0f}",
                    f"{r.cpu_s:,.0f}",
                    f"{r.per_hour:.1f}",
                    f"{r.per_cpu_hour:.1f}",
                    f"{r.passes:,}",
                    f"{r.sequence_passes / max(1, r.passes):.2f}",
                    r.peak_active,
                    f"{r.encoded:,}",
                    f"{r.identical} of {r.checked}",
                    f"{r.peak_rss_mib:,.0f}",
                ]
            )
    return rows


def run(args: argparse.Namespace) -> list[Table]:
    check_adapter()
    args.out.mkdir(parents=True, exist_ok=True)
    study = slice_study(
        args.out / "study",
        ROOT,
        arms=tuple(args.arms.split(",")),
        task_ids=part_of_slice(args.tasks),
        concurrency=args.concurrency,
        kv_memory_mb=args.kv_memory_mb,
        engine_per_arm=args.engine_per_arm,
    )
    load_models(study)
    counter = [0]
    settings: dict[str, Callable[[], Round]] = {
        BOUNDED: lambda: play(args, study, BOUNDED, counter),
        FREE: lambda: play(args, study, FREE, counter),
    }
    results = alternate(settings, args.rounds)
    bound = statistics.median(r.per_hour for r in results[BOUNDED])
    free = statistics.median(r.per_hour for r in results[FREE])
    bound_cpu = statistics.median(r.per_cpu_hour for r in results[BOUNDED])
    free_cpu = statistics.median(r.per_cpu_hour for r in results[FREE])
    pairs = [
        ratio(b.per_hour, f.per_hour) for b, f in zip(results[BOUNDED], results[FREE], strict=True)
    ]
    n_tasks = len(study.task_ids or [])
    layout = "an engine an arm" if args.engine_per_arm else "arms sharing weights share an engine"
    title = (
        f"{n_tasks} tasks × {len(study.models[0].arms)} arms ({layout}), "
        f"{args.concurrency} in flight, "
        f"{args.kv_memory_mb:g} MiB of KV per arm against no bound, {args.rounds} "
        "alternating rounds each"
    )
    header = [
        "setting",
        "round",
        "episodes",
        "wall s",
        "CPU-s",
        "episodes / hour",
        "episodes / CPU-hour",
        "passes",
        "sequences a pass",
        "peak in flight (an engine)",
        "prompt tokens encoded",
        "identical to the archive",
        "process peak RSS so far, MiB",
    ]
    notes = [
        f"Bound / no bound, episodes per hour: {ratio(bound, free)} (medians; per round "
        f"pair {', '.join(pairs)}); per CPU-hour: {ratio(bound_cpu, free_cpu)}."
    ]
    return [Table(header, summary_rows(results), "lrrrrrrrrrrrr", title=title, notes=notes)]
