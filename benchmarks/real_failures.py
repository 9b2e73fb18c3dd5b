"""Error rates of `flatscore analyze` on studies resampled from the committed archives.

Real agents fail in clusters (a few tasks hold most of a reference's failed calls), so the
failure-count statistics are checked on the committed studies' own episodes, not only on
smooth synthetic data. Each replication of a condition builds one study: in each domain
(retail, telecom) the pool's tasks drawn with replacement, as many as it holds (real
episodes; a task drawn twice becomes two tasks, `<task>@<slot>`, each side's trials
renumbered from 1), one comparison per domain. It is analysed as `flatscore analyze
--sequential --json` analyses run files (the fixed design and the sequential replay in one
call, Holm across the study's two comparisons, the committed studies' settings; printed at
the start). Conditions (`--conditions`):

- null-v1-split: study v1's `ref`, each task's 4 trials split at random 2 + 2 into two
  pseudo-arms (`ref` and `ref-split`, 114 tasks × 2 trials);
- null-v3-split: study v3's `ref`, its 2 trials split 1 + 1;
- null-v2-swap, null-v3-swap: `ref` against its replicate `ref-control` (other seeds), the
  two sides swapped per task at random (the tasks both ran, trials 1–2);
- planted-v2, planted-v3: `ref-planted` (a dropped argument in 10 % of calls, role
  confusion 5 %) against `ref` on the tasks both ran, trials 1–2;
- identical: a degenerate null, the same episodes on both sides (study v3's `ref`, trial
  1): nothing may be flagged.

Per condition and domain, for the fixed design and the sequential reading: false
amplification (any channel or all failed calls flagged amplified, in a null), false damage
(verdict "visible damage" in a null), any damage verdict, the "no damage detected" share,
and for the planted pairs the share flagging each planted channel (bad_arguments;
role_confusion where the planted arm shows any). `--out FILE` keeps every replication's
outcome (JSON lines, appended as they finish): a killed run resumes from it, and a finished
one re-tabulates from it without analysing again (outcomes count only under the same
analysis settings, draw seed and statistics code: `flatscore.analysis`'s files, hashed).
`--write-runs DIR` writes one replication's study as run files, for `flatscore analyze DIR
--reference ref --sequential ...` itself. `--workers N` analyses N studies at once (use 1
on a shared machine).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
import zlib
from collections import defaultdict
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel

from benchmarks.harness import ROOT, Table
from flatscore.analysis.analyze import analyze
from flatscore.analysis.comparable import check_comparable
from flatscore.analysis.identity import unique_episodes
from flatscore.analysis.result import AnalysisResult
from flatscore.analysis.settings import AnalysisSettings
from flatscore.cli.options import settings_from_flags
from flatscore.episode import Episode
from flatscore.errors import InputError
from flatscore.report import analysis_json
from flatscore.store import archive

DOMAINS = ("retail", "telecom")
REFERENCE = "ref"
STUDY = "real-failures"
PLANTED_CHANNELS = ("bad_arguments", "role_confusion")
"""What `ref-planted` plants (docs/embedded-study-v2.md): a dropped required argument
(bad_arguments) and a user tool called by the agent (role_confusion)."""
RUN_METADATA = ("stopping", "task_rank", "sequential_max_tasks", "control_of")
"""Metadata dropped from every drawn episode: the source run's sequential order (a
resampled study is read in the analysis' seeded task order) and its control label."""

Kind = Literal["split", "swap", "planted", "identical"]


@dataclass(frozen=True)
class Source:
    """A committed study's archive and the trials it is read on (its documented command's
    `--trial-range`)."""

    name: str
    runs: Path
    trials: int  # trials 0 .. trials-1 are read


SOURCES = {
    "v1": Source("v1", ROOT / "studies" / "embedded-study" / "runs", 4),
    "v2": Source("v2", ROOT / "studies" / "embedded-study-v2" / "runs", 2),
    "v3": Source("v3", ROOT / "studies" / "embedded-study-v3" / "runs", 2),
}


@dataclass(frozen=True)
class Condition:
    name: str
    kind: Kind
    source: str
    arm: str  # the other side's arm in the archive (`ref` itself for split / identical)
    label: str  # the other side's arm name in the built study
    null: bool

    @property
    def describe(self) -> str:
        trials = SOURCES[self.source].trials
        return {
            "split": f"study {self.source}'s ref, each task's {trials} trials split "
            f"{trials // 2} + {trials // 2} at random",
            "swap": f"study {self.source}'s ref against {self.arm}, sides swapped per task at "
            "random",
            "planted": f"study {self.source}'s {self.arm} against ref",
            "identical": f"study {self.source}'s ref trial 1 on both sides (degenerate null)",
        }[self.kind]


CONDITIONS = {
    c.name: c
    for c in (
        Condition("null-v1-split", "split", "v1", REFERENCE, "ref-split", True),
        Condition("null-v3-split", "split", "v3", REFERENCE, "ref-split", True),
        Condition("null-v2-swap", "swap", "v2", "ref-control", "ref-control", True),
        Condition("null-v3-swap", "swap", "v3", "ref-control", "ref-control", True),
        Condition("planted-v2", "planted", "v2", "ref-planted", "ref-planted", False),
        Condition("planted-v3", "planted", "v3", "ref-planted", "ref-planted", False),
        Condition("identical", "identical", "v3", REFERENCE, "ref-same", True),
    )
}

Task = tuple[list[Episode], list[Episode]]
"""One task's episodes: the reference side's and the other side's (the same list for a
split or identical condition, whose replications divide or copy it), by trial."""
Pools = dict[tuple[str, str], list[Task]]
"""(condition, domain) → the tasks a replication draws from."""


def read_arms(source: Source, arms: Iterable[str]) -> dict[str, list[Episode]]:
    """The source's episodes of these arms (its trials only), from its committed archive."""
    chunks = archive.chunks(source.runs)
    out: dict[str, list[Episode]] = {}
    for arm in arms:
        (stem,) = [s for s in chunks if s.split("__", 1)[1] == arm]
        out[arm] = [ep for ep, _ in archive.archived(chunks[stem]) if ep.trial < source.trials]
    return out


def by_task(episodes: Iterable[Episode], domain: str, trials: int) -> dict[str, list[Episode]]:
    """The domain's tasks that hold every one of the trials, each with its episodes by trial."""
    tasks: dict[str, list[Episode]] = defaultdict(list)
    for ep in episodes:
        if ep.domain == domain and not ep.is_infrastructure_error:
            tasks[ep.task_id].append(ep)
    return {
        task: sorted(eps, key=lambda e: e.trial)
        for task, eps in sorted(tasks.items())
        if sorted(e.trial for e in eps) == list(range(trials))
    }


def build_pools(conditions: Sequence[Condition]) -> Pools:
    """Each condition's tasks per domain, read once per archive."""
    wanted: dict[str, set[str]] = defaultdict(set)
    for c in conditions:
        wanted[c.source] |= {REFERENCE, c.arm}
    episodes = {
        name: read_arms(SOURCES[name], sorted(arms)) for name, arms in sorted(wanted.items())
    }
    pools: Pools = {}
    for c in conditions:
        trials = SOURCES[c.source].trials
        for domain in DOMAINS:
            ref = by_task(episodes[c.source][REFERENCE], domain, trials)
            other = by_task(episodes[c.source][c.arm], domain, trials)
            pools[(c.name, domain)] = [(ref[t], other[t]) for t in ref if t in other]
    return pools


def relabel(ep: Episode, arm: str, task: str, trial: int, slot: int) -> Episode:
    """The episode as slot `slot`'s: its own task id, arm and trial in the built study."""
    metadata = {k: v for k, v in ep.metadata.items() if k not in RUN_METADATA}
    return ep.model_copy(
        update={
            "study": STUDY,
            "arm": arm,
            "task_id": f"{task}@{slot}",
            "trial": trial,
            "episode_id": f"{ep.episode_id}@{slot}@{arm}",
            "metadata": metadata,
        }
    )


def replication_rng(
    seed: int, condition: str, domain: str, replication: int
) -> np.random.Generator:
    """One replication's draws, the same whichever other conditions or replications run."""
    key = zlib.crc32(f"{condition}/{domain}".encode())
    return np.random.default_rng([seed, key, replication])


def draw_study(
    condition: Condition, pool: Sequence[Task], rng: np.random.Generator
) -> list[Episode]:
    """One resampled study: len(pool) tasks drawn with replacement, each drawn task's
    episodes given to the two sides as the condition says."""
    out: list[Episode] = []
    label = condition.label
    for slot, index in enumerate(rng.integers(0, len(pool), len(pool))):
        ref, other = pool[int(index)]
        task = ref[0].task_id
        if condition.kind == "split":
            order = rng.permutation(len(ref))
            half = len(ref) // 2
            sides = [(REFERENCE, [ref[i] for i in order[:half]])]
            sides.append((label, [ref[i] for i in order[half:]]))
        elif condition.kind == "identical":
            sides = [(REFERENCE, ref[:1]), (label, ref[:1])]
        elif condition.kind == "swap" and rng.random() < 0.5:
            sides = [(REFERENCE, other), (label, ref)]
        else:
            sides = [(REFERENCE, ref), (label, other)]
        for arm, episodes in sides:
            out += [relabel(ep, arm, task, t, slot) for t, ep in enumerate(episodes)]
    return out


class AnalysisFlags(BaseModel):
    """The analysis of every replication, as `flatscore analyze` flags (the committed
    studies' own settings, but for `bootstrap`)."""

    reference: str = REFERENCE
    budgets: str = "0-9"
    tost_margin: float = 7.5
    tight_budget: int = 2
    bootstrap: int = 5000
    seed: int = 0
    correction: str = "holm"
    sequential: bool = True

    def command(self) -> str:
        return (
            f"flatscore analyze RUNS --reference {self.reference} --budgets {self.budgets} "
            f"--tost-margin {self.tost_margin:g} --tight-budget {self.tight_budget} "
            f"--bootstrap {self.bootstrap} --seed {self.seed} --correction {self.correction}"
            + (" --sequential" if self.sequential else "")
            + " --json FILE"
        )


def analyze_like_the_cli(episodes: list[Episode], flags: AnalysisFlags) -> dict[str, Any]:
    """What `flatscore analyze ... --json` writes for these episodes: the command's own
    steps (settings from its flags, duplicate check, comparability check, analysis)."""
    options = settings_from_flags(AnalysisSettings, **flags.model_dump())
    unique, dropped = unique_episodes((("drawn", ep) for ep in episodes), options.dedupe)
    check_comparable(unique)
    result: AnalysisResult = analyze(unique, options)
    result.notices[:0] = dropped  # worded first, as the pipeline puts them
    loaded: dict[str, Any] = json.loads(analysis_json(result))
    return loaded


class DesignOutcome(BaseModel):
    verdict: str
    amplified_channels: list[str]
    failed_calls_amplified: bool = False
    tasks: int


class Outcome(BaseModel):
    """One replication of one condition in one domain: what each design decided."""

    condition: str
    domain: str
    replication: int
    settings: str
    """`settings_key`: outcomes are pooled only under the same settings."""
    tasks: int
    seconds: float
    """Wall seconds to draw and analyse the replication's study (all its domains)."""
    cpu_seconds: float | None = None
    fixed: DesignOutcome
    sequential: DesignOutcome | None

    def amplification(self, design: str) -> bool | None:
        d = self.design(design)
        if d is None:
            return None
        return bool(
            d.amplified_channels
            or d.failed_calls_amplified
            or (design == "sequential" and d.verdict == "flat score, amplified failures")
        )

    def design(self, design: str) -> DesignOutcome | None:
        return self.fixed if design == "fixed" else self.sequential


def outcomes_of(result: dict[str, Any], domain: str) -> tuple[DesignOutcome, DesignOutcome | None]:
    """The domain's one comparison: its fixed-design and sequential outcomes, from
    analysis.json."""
    (cell,) = [c for c in result["cells"] if c["domain"] == domain]
    (comp,) = cell["comparisons"]
    failed = comp.get("failed_calls") or {}
    fixed = DesignOutcome(
        verdict=comp["verdict"],
        amplified_channels=comp["amplified_channels"],
        failed_calls_amplified=bool(failed.get("amplified")),
        tasks=comp["paired_tasks"],
    )
    seq = comp.get("sequential")
    if seq is None:
        return fixed, None
    return fixed, DesignOutcome(
        verdict=seq["verdict"],
        amplified_channels=seq.get("amplified_channels", []),
        tasks=seq["tasks"],
    )


def statistics_code() -> str:
    """A hash of the analysis package's files (`flatscore.analysis`): outcomes of other
    statistics are never pooled with these."""
    import flatscore.analysis

    package = Path(flatscore.analysis.__file__).parent
    digest = hashlib.sha256()
    for path in sorted(p for p in package.rglob("*") if p.suffix in (".py", ".yaml", ".json")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def settings_key(flags: AnalysisFlags, seed: int) -> str:
    """The analysis flags, the draw seed and the statistics' code, hashed: a run resumes,
    and tabulates, only outcomes of the same three."""
    text = json.dumps(
        {"flags": flags.model_dump(), "seed": seed, "code": statistics_code()}, sort_keys=True
    )
    return hashlib.sha256(text.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Job:
    condition: str
    domains: tuple[str, ...]
    replication: int


_POOLS: Pools = {}
"""The pools a worker process draws from (set by `_start_worker`)."""


def _start_worker(pools: Pools) -> None:
    _POOLS.update(pools)


def draw_domains(job: Job, seed: int, pools: Pools) -> list[Episode]:
    """One replication's study: each domain drawn on its own (the same draws whichever
    domains the study holds)."""
    condition = CONDITIONS[job.condition]
    return [
        ep
        for domain in job.domains
        for ep in draw_study(
            condition,
            pools[(job.condition, domain)],
            replication_rng(seed, job.condition, domain, job.replication),
        )
    ]


def run_job(job: Job, flags: AnalysisFlags, seed: int, pools: Pools | None = None) -> list[Outcome]:
    """One replication: draw the study, analyse it (every domain in one analysis, as a
    study is analysed: Holm across its comparisons), read each domain's outcomes."""
    pools = pools if pools is not None else _POOLS
    start, cpu = time.perf_counter(), time.process_time()
    result = analyze_like_the_cli(draw_domains(job, seed, pools), flags)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    outcomes = []
    for domain in job.domains:
        fixed, seq = outcomes_of(result, domain)
        outcomes.append(
            Outcome(
                condition=job.condition,
                domain=domain,
                replication=job.replication,
                settings=settings_key(flags, seed),
                tasks=len(pools[(job.condition, domain)]),
                seconds=wall,
                cpu_seconds=cpu,
                fixed=fixed,
                sequential=seq,
            )
        )
    return outcomes


def read_outcomes(path: Path | None, key: str) -> list[Outcome]:
    """The outcomes already in `--out` under these settings (a torn last line is skipped:
    the run was killed while writing it)."""
    if path is None or not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            outcome = Outcome.model_validate_json(line)
        except ValueError:
            continue
        if outcome.settings == key:
            out.append(outcome)
    return out


def share(values: Sequence[bool | None]) -> str:
    known = [v for v in values if v is not None]
    return f"{100 * sum(known) / len(known):.0f} %" if known else "—"


DAMAGE_VERDICTS = ("visible damage", "flat score, amplified failures")
HEADER = [
    "condition",
    "domain",
    "tasks",
    "reps",
    "design",
    "false amplification",
    "false damage",
    "damage verdict",
    '"no damage detected"',
    *(f"{channel} flagged" for channel in PLANTED_CHANNELS),
]


def row(
    condition: Condition, group: Sequence[Outcome], design: str, planted: set[str]
) -> list[object]:
    """One condition, domain and design: its rates over the replications."""
    found = [o.design(design) for o in group]
    ds = [d for d in found if d is not None]
    null = condition.null
    return [
        condition.name,
        group[0].domain,
        group[0].tasks,
        len(group),
        design,
        share([o.amplification(design) for o in group]) if null else "—",
        share([d.verdict == "visible damage" for d in ds]) if null else "—",
        share([d.verdict in DAMAGE_VERDICTS for d in ds]),
        share([d.verdict == "no damage detected" for d in ds]),
        *(
            share([ch in d.amplified_channels for d in ds]) if ch in planted else "—"
            for ch in PLANTED_CHANNELS
        ),
    ]


def tables(outcomes: Sequence[Outcome], planted: dict[tuple[str, str], set[str]]) -> list[Table]:
    """Per condition and domain, each design's rates over its replications."""
    groups: dict[tuple[str, str], list[Outcome]] = defaultdict(list)
    for o in outcomes:
        groups[(o.condition, o.domain)].append(o)
    order = list(CONDITIONS)
    rows = [
        row(CONDITIONS[name], group, design, planted.get((name, domain), set()))
        for (name, domain), group in sorted(
            groups.items(), key=lambda g: (order.index(g[0][0]), g[0][1])
        )
        for design in ("fixed", "sequential")
        if all(o.design(design) is not None for o in group)
    ]
    notes = [
        "False amplification: any channel, or all failed calls together, flagged amplified "
        '(sequentially: a channel decided amplified, or the verdict "flat score, amplified '
        'failures"). False damage: the verdict "visible damage" (a success drop). Damage '
        'verdict: "visible damage" or "flat score, amplified failures" (in a null, any false '
        "alarm; in a planted pair, the pair found). The planted channels' columns only for "
        "the planted pairs, where the planted arm has calls in that channel.",
    ]
    studies = {(o.condition, o.replication): o for o in outcomes}.values()
    if studies:
        wall = [o.seconds for o in studies]
        cpu = [o.cpu_seconds for o in studies if o.cpu_seconds is not None]
        cpu_text = f", {np.median(cpu):.2f} s of CPU" if cpu else ""
        notes.append(
            f"{len(studies)} studies (replications × conditions), each drawn and analysed "
            f"in {np.median(wall):.2f} s median wall{cpu_text} ({sum(wall):.0f} s wall in all)."
        )
    return [Table(HEADER, rows, "llrrlrrrrrr", notes=notes)]


def planted_channels(pools: Pools) -> dict[tuple[str, str], set[str]]:
    """Per planted condition and domain, the planted channels its arm shows any call in
    (role confusion needs user tool names in the agent's view, which retail lacks)."""
    from flatscore.analysis.channels import load_rules
    from flatscore.analysis.facts import episode_facts

    rules = load_rules()
    out: dict[tuple[str, str], set[str]] = {}
    for (name, domain), pool in pools.items():
        if CONDITIONS[name].kind != "planted":
            continue
        counts: dict[str, int] = defaultdict(int)
        for _, arm in pool:
            for ep in arm:
                for channel, n in episode_facts(ep, rules).channels.items():
                    counts[channel] += n
        out[(name, domain)] = {ch for ch in PLANTED_CHANNELS if counts.get(ch, 0) > 0}
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--replications", type=int, default=200, help="studies per condition and domain"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the task draws")
    parser.add_argument(
        "--conditions",
        default=",".join(CONDITIONS),
        help=f"comma-separated, of: {', '.join(CONDITIONS)} (default: all)",
    )
    parser.add_argument("--domains", default=",".join(DOMAINS), help="comma-separated")
    parser.add_argument(
        "--bootstrap",
        type=int,
        default=AnalysisFlags().bootstrap,
        help="each analysis' bootstrap resamples (the studies' own 5000: ~0.3 s of CPU a "
        "comparison)",
    )
    parser.add_argument(
        "--no-sequential", action="store_true", help="the fixed design only (no --sequential)"
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="processes analysing replications at once (1 on a shared machine)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        metavar="FILE",
        help="every replication's outcome, one JSON line each, appended; resumes from it",
    )
    parser.add_argument(
        "--write-runs",
        type=Path,
        metavar="DIR",
        help="write replication 0 of the first condition as run files there "
        "and stop (for `flatscore analyze DIR` itself)",
    )


def parse_names(text: str, known: Sequence[str], what: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise SystemExit(f"--{what}: unknown {unknown or text!r}; known: {', '.join(known)}")
    return names


def write_runs(episodes: Sequence[Episode], folder: Path) -> list[Path]:
    """The episodes as run files `<model>__<arm>.jsonl`, one per arm."""
    folder.mkdir(parents=True, exist_ok=True)
    files: dict[Path, list[str]] = defaultdict(list)
    for ep in episodes:
        files[folder / f"{ep.model}__{ep.arm}.jsonl"].append(ep.model_dump_json())
    for path, lines in files.items():
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return sorted(files)


def run(args: argparse.Namespace) -> list[Table]:
    names = parse_names(args.conditions, list(CONDITIONS), "conditions")
    domains = parse_names(args.domains, list(DOMAINS), "domains")
    if args.replications < 1 or args.workers < 1:
        raise SystemExit("--replications and --workers must be at least 1")
    flags = AnalysisFlags(bootstrap=args.bootstrap, sequential=not args.no_sequential)
    try:
        settings_from_flags(AnalysisSettings, **flags.model_dump())
    except InputError as exc:
        raise SystemExit(f"error: {exc}") from None
    key = settings_key(flags, args.seed)
    print(f"reading the archives for {', '.join(names)}", file=sys.stderr)
    pools = build_pools([CONDITIONS[n] for n in names])
    if args.write_runs is not None:
        episodes = draw_domains(Job(names[0], tuple(domains), 0), args.seed, pools)
        write_runs(episodes, args.write_runs)
        print(f"wrote {names[0]}, replication 0, to {args.write_runs}; analyse it with:")
        print("  " + flags.command().replace("RUNS", str(args.write_runs)))
        return []
    print(f"each replication: {flags.command()}", file=sys.stderr)
    print(
        "  (one study per replication: each domain's tasks drawn with replacement, as many "
        f"as the pool holds; draw seed {args.seed}; statistics code {statistics_code()}, "
        f"settings key {key})",
        file=sys.stderr,
    )
    for name in names:
        print(f"  {name}: {CONDITIONS[name].describe}", file=sys.stderr)
    done = read_outcomes(args.out, key)
    have = {(o.condition, o.domain, o.replication) for o in done}
    jobs = [
        Job(n, tuple(d for d in domains if (n, d, r) not in have), r)
        for r in range(args.replications)
        for n in names
        if any((n, d, r) not in have for d in domains)
    ]
    if done:
        print(f"resuming: {len(done)} outcomes in {args.out}, {len(jobs)} to go", file=sys.stderr)
    outcomes = [
        o
        for o in done
        if o.condition in names and o.domain in domains and o.replication < args.replications
    ]
    for i, found in enumerate(run_jobs(jobs, flags, args.seed, pools, args.workers), 1):
        outcomes += found
        if args.out is not None:
            with args.out.open("a", encoding="utf-8") as fh:
                fh.write("".join(o.model_dump_json() + "\n" for o in found))
        verdicts = "; ".join(
            f"{o.domain} {o.fixed.verdict} / {o.sequential.verdict if o.sequential else '-'}"
            for o in found
        )
        print(
            f"[{i}/{len(jobs)}] {found[0].condition} #{found[0].replication}: {verdicts} "
            f"({found[0].seconds:.1f} s)",
            file=sys.stderr,
        )
    return tables(outcomes, planted_channels(pools))


def run_jobs(
    jobs: Sequence[Job], flags: AnalysisFlags, seed: int, pools: Pools, workers: int
) -> Iterable[list[Outcome]]:
    """The jobs' outcomes as they finish: in this process, or in `workers` processes."""
    if workers == 1:
        for job in jobs:
            yield run_job(job, flags, seed, pools)
        return
    with ProcessPoolExecutor(workers, initializer=_start_worker, initargs=(pools,)) as pool:
        futures = [pool.submit(run_job, job, flags, seed) for job in jobs]
        for future in futures:
            yield future.result()
