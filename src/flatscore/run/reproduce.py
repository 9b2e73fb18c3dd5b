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

from flatscore.errors import InputError
from flatscore.run.study import Study, load_study

V2_STUDY_FILE = Path("examples") / "embedded-study-v2.yaml"
V2_ARCHIVE = Path("studies") / "embedded-study-v2" / "runs"
V2_ADAPTER_SHA256 = "0e47264aafe71b162b94893d050ee900356f70337625ef3f08a1ca4e2d760b51"
"""The adapter every study-v2 episode was played with (named in `metadata.weights`)."""

SLICE_ARMS: tuple[str, ...] = ("ref", "ref-planted", "int4-awq")
"""The reference, the positive control and the real arm with visible damage."""
SLICE_TRIAL = 0
SLICE_TELECOM_TEMPLATES = 8
"""Telecom tasks in the slice (the first task of its first 8 of 11 templates)."""
SLICE_CONCURRENCY = 48
SLICE_KV_MEMORY_MB = 256.0
"""Per arm: three one-thread engines, their weights and KV budgets within 4 GB resident."""
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
    from flatscore.run.demo import stratified_task_ids

    retail_templates = len({t.template for t in _tasks("retail")})
    return stratified_task_ids(["retail"], "test", retail_templates) + stratified_task_ids(
        ["telecom"], "test", telecom_templates
    )


def _tasks(domain: str) -> list:  # type: ignore[type-arg]
    from flatscore.domains import get_domain

    return list(get_domain(domain).tasks("test"))


def slice_study(
    output: Path,
    root: Path,
    *,
    arms: tuple[str, ...] = SLICE_ARMS,
    task_ids: list[str] | None = None,
    concurrency: int = SLICE_CONCURRENCY,
    kv_memory_mb: float = SLICE_KV_MEMORY_MB,
) -> Study:
    """Study v2's own file, narrowed to the slice: `arms`, `task_ids`, the first trial, and
    the engine's memory settings; the name stays the study's, so every episode id is the
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
            "engine_per_arm": True,
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
            "title": f"{study.title} · the demo's live slice",
        }
    )
