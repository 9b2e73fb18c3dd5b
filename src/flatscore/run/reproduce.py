"""`flatscore demo`: a slice of the shipped study v2 run live and compared with its archive.

Study v2 (docs/embedded-study-v2.md) is committed as a run archive
(`studies/embedded-study-v2/runs`). The demo runs a stratified slice of it on this machine —
the study's own file (`examples/embedded-study-v2.yaml`: model, arms, seeds, sampling,
budget, steps), the shipped adapter checked by its sha256, one trial, the reference, the
planted control and one real arm, every retail template and most of telecom's — and
compares every live episode with the archived one (`flatscore.store.compare`). Then it
writes the report of the whole study from the archive, with the reproduced count on top.

Only the engine's memory settings differ from the study's (a laptop's 4 GB instead of
12 GB): fewer episodes in flight and no private copy of the system turn, both of which
leave every logit unchanged (the batch engine is batch-invariant; docs/embedded-study-v2.md,
"Engine settings and speed"), which is what the comparison checks.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel
from rich.console import Console
from rich.text import Text

from flatscore.analysis.result import AnalysisResult
from flatscore.analysis.settings import AnalysisSettings
from flatscore.console import make_console
from flatscore.episode import Episode
from flatscore.errors import InputError
from flatscore.report import ReportPaths
from flatscore.report.demo_text import (
    READING_ARCHIVE,
    LiveSlice,
    demo_banner,
    interrupted,
    reproduced_title,
    resuming_slice,
    running_slice,
    slice_title,
    whole_study,
)
from flatscore.report.reproduction import Banner
from flatscore.run.study import load_study
from flatscore.store.compare import Reproduction, reproduce
from flatscore.study import Study

V2_STUDY_FILE = Path("examples") / "embedded-study-v2.yaml"
V2_ARCHIVE = Path("studies") / "embedded-study-v2" / "runs"
V2_ADAPTER_SHA256 = "0e47264aafe71b162b94893d050ee900356f70337625ef3f08a1ca4e2d760b51"
"""The adapter every study-v2 episode was played with (named in `metadata.weights`)."""

SLICE_ARMS: tuple[str, ...] = ("ref", "ref-planted", "int4-awq")
"""The reference, the positive control and the real arm with visible damage."""
SLICE_TRIAL = 0
SLICE_TELECOM_TEMPLATES = 6
"""Telecom tasks in the slice (the first task of its first 6 of 11 templates): with every
retail template, 45 episodes, which fit 20 minutes on 2 cores with the install."""
SLICE_CONCURRENCY = 48
SLICE_KV_MEMORY_MB = 427.0
"""Per arm. ref and ref-planted play the same weights and share one engine with their two
budgets; int4-awq has its own; one thread each. Two copies of the weights and three budgets
(2 x 513 + 3 x 427 MiB) hold what three engines at 256 MiB did (3 x 513 + 3 x 256 MiB),
within 4 GB resident, and the shared engine packs both arms' sequences into its passes."""
REPORT_TRIALS = "1-2"
"""The study's committed read (docs/embedded-study-v2.md): trials 1 and 2 of every arm."""


def repository_root() -> Path:
    """The clone this flatscore runs from (an editable install): the demo reads the study
    file and the archive there."""
    import flatscore

    root = Path(flatscore.__file__).resolve().parents[2]
    if not (root / V2_ARCHIVE).is_dir() or not (root / V2_STUDY_FILE).is_file():
        raise InputError(
            "the demo reproduces study v2 from a clone of the repository (its "
            f"{V2_ARCHIVE} and {V2_STUDY_FILE}); this flatscore is installed from elsewhere: "
            "run it from a clone (make demo), or pass --fresh for a small study of your own",
            file=str(root),
        )
    return root


def slice_task_ids(telecom_templates: int = SLICE_TELECOM_TEMPLATES) -> list[str]:
    """The first test task of every retail template and of telecom's first
    `telecom_templates` templates (in the split's order)."""
    from flatscore.domains import get_domain
    from flatscore.run.demo import stratified_task_ids

    retail_templates = len({t.template for t in get_domain("retail").tasks("test")})
    return stratified_task_ids(["retail"], "test", retail_templates) + stratified_task_ids(
        ["telecom"], "test", telecom_templates
    )


def slice_study(
    output: Path,
    root: Path,
    *,
    arms: tuple[str, ...] = SLICE_ARMS,
    task_ids: list[str] | None = None,
    concurrency: int = SLICE_CONCURRENCY,
    kv_memory_mb: float = SLICE_KV_MEMORY_MB,
    engine_per_arm: bool = False,
) -> Study:
    """Study v2's own file, narrowed to the slice: `arms`, `task_ids`, the first trial, and
    the engine's memory settings (`engine_per_arm`: a copy of the weights and an engine for
    every arm, as the study ran); the name stays the study's, so every episode id is the
    archived one's."""
    study = load_study(root / V2_STUDY_FILE)
    model = study.models[0]
    unknown = [a for a in arms if a not in model.arms]
    if unknown:
        raise InputError(
            f"study v2 has no arm {', '.join(unknown)} (arms: {', '.join(model.arms)})",
            field="--arms",
        )
    chosen = {a: model.arms[a] for a in arms}
    for name, arm in list(chosen.items()):  # a planted or control arm needs its base
        base = arm.inject.base if arm.inject else arm.control_of
        if base and base not in chosen:
            raise InputError(f"arm {name} needs its base arm {base} in the slice", field="--arms")
    model = model.model_copy(
        update={
            "arms": chosen,
            "compute": "fp32",
            "kv_memory_mb": kv_memory_mb,
            "private_prefix": False,
            "engine_per_arm": engine_per_arm,
            "threads": 1,
        }
    )
    return study.model_copy(
        update={
            "output": str(output.resolve()),
            "models": [model],
            "task_ids": task_ids if task_ids is not None else slice_task_ids(),
            "trials": SLICE_TRIAL + 1,
            "concurrency": concurrency,
            "title": slice_title(study.report_title),
        }
    )


def check_adapter() -> str:
    """The embedded model's adapter is study v2's (by sha256), else one line why the slice
    cannot reproduce it."""
    from flatscore.models.adapter import ADAPTER_ENV, adapter_sha256, shipped_adapter

    adapter = shipped_adapter()
    digest = adapter_sha256(adapter) if adapter is not None else "none (the base model)"
    if digest != V2_ADAPTER_SHA256:
        raise InputError(
            f"the embedded model's adapter is {digest[:12]}, study v2 was played with "
            f"{V2_ADAPTER_SHA256[:12]}: unset ${ADAPTER_ENV}, or pass --no-verify to report "
            "the archive without running it",
            file=str(adapter) if adapter is not None else None,
        )
    return digest


def study_options(study: Study) -> AnalysisSettings:
    """The study file's analysis, on the committed read (trials 1-2), with the sequential
    replay: what the demo's report says."""
    from flatscore.analysis.trials import parse_trials

    return study.analysis.model_copy(
        update={"trials": parse_trials(REPORT_TRIALS), "sequential": True}
    )


def archive_episodes(archive: Path) -> list[Episode]:
    from flatscore.store.archive import archived, chunks

    return [ep for paths in chunks(archive).values() for ep, _ in archived(paths)]


def live_episodes(runs: Path) -> list[Episode]:
    from flatscore.store.jsonl import read_episodes

    return [ep for path in sorted(runs.glob("*.jsonl")) for ep in read_episodes(path)]


def live_slice(reproduction: Reproduction, live: list[Episode]) -> LiveSlice:
    """What ran live (arms in the order they ran, tasks per domain, trials from 1) and what
    the comparison found."""
    tasks: dict[str, set[str]] = {}
    for ep in live:
        tasks.setdefault(ep.domain, set()).add(ep.task_id)
    return LiveSlice(
        study_file=V2_STUDY_FILE,
        adapter_sha256=V2_ADAPTER_SHA256,
        arms=list(dict.fromkeys(ep.arm for ep in live)),
        tasks={domain: len(ids) for domain, ids in tasks.items()},
        trials=sorted({ep.trial + 1 for ep in live}),
        reproduction=reproduction,
    )


def make_banner(reproduction: Reproduction | None, live: list[Episode], episodes: int) -> Banner:
    """The report's first screen: the reproduced count, what ran, the first divergence."""
    whole = whole_study(episodes, REPORT_TRIALS, V2_ARCHIVE)
    return demo_banner(whole, None if reproduction is None else live_slice(reproduction, live))


class DemoResult(BaseModel):
    """What `flatscore demo` found and wrote."""

    reproduction: Reproduction | None
    report: ReportPaths
    analysis: AnalysisResult


def report_study(
    archive: Path,
    out: Path,
    study: Study,
    *,
    live_runs: Path | None,
    console: Console | None = None,
) -> DemoResult:
    """Compare the live runs (if any) with the archive, then write the whole study's report
    into `out` with the reproduction on top, and `reproduction.json` beside it."""
    from flatscore.analysis.trials import pick_trials
    from flatscore.formats.pipeline import analyze_labelled
    from flatscore.report import write_report

    console = console or make_console()
    live = live_episodes(live_runs) if live_runs is not None else []
    reproduction = reproduce(live, archive) if live_runs is not None else None
    # The count itself heads the lines printed at the end (`print_lines`).
    console.print(Text(READING_ARCHIVE), soft_wrap=True)
    options = study_options(study)
    episodes = pick_trials(archive_episodes(archive), options.trials)
    result = analyze_labelled(((None, ep) for ep in episodes), options).result
    banner = make_banner(reproduction, live, len(episodes))
    out.mkdir(parents=True, exist_ok=True)
    paths = write_report(
        result,
        episodes,
        out,
        rules=options.rules,
        title=reproduced_title(study.report_title),
        banner=banner,
    )
    if reproduction is not None:
        (out / "reproduction.json").write_text(
            reproduction.model_dump_json(indent=2) + "\n", encoding="utf-8"
        )
    print_lines(banner, result, paths, console)
    return DemoResult(reproduction=reproduction, report=paths, analysis=result)


def print_lines(
    banner: Banner, result: AnalysisResult, paths: ReportPaths, console: Console
) -> None:
    """The first screen in the terminal: the count, each arm's verdict, where the report is."""
    from flatscore.report.reproduction import banner_markdown

    for line in banner_markdown(banner, result).splitlines():
        console.print(Text(line.replace("**", "")), soft_wrap=True)
    console.print(Text(f"report: {paths.html}"), soft_wrap=True)


def run_reproduction(
    out: Path,
    *,
    verify: bool = True,
    arms: tuple[str, ...] = SLICE_ARMS,
    concurrency: int = SLICE_CONCURRENCY,
    progress: bool = True,
    console: Console | None = None,
) -> DemoResult:
    """`flatscore demo`: run the slice (resuming one that stopped), compare it with the
    archive and write the whole study's report; `verify=False` runs nothing and reports the
    archive."""
    from flatscore.run.driver import run_study

    console = console or make_console()
    root = repository_root()
    study = slice_study(out, root, arms=arms, concurrency=concurrency)
    archive = root / V2_ARCHIVE
    if not verify:
        return report_study(archive, out, study, live_runs=None, console=console)
    check_adapter()
    runs = study.output_dir / "runs"
    resume = runs.exists() and any(runs.glob("*.jsonl"))
    if resume:
        console.print(Text(resuming_slice(runs)))
    tasks = len(study.task_ids or [])
    line = running_slice(tasks * len(arms), arms, tasks, SLICE_TRIAL + 1, V2_ARCHIVE)
    console.print(Text(line), soft_wrap=True)
    try:
        run_study(study, resume=resume, progress=progress, report=False, console=console)
    except KeyboardInterrupt:
        console.print(Text(interrupted(runs)))
        raise
    return report_study(archive, out, study, live_runs=runs, console=console)
