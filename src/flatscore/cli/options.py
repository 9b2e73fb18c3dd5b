"""Flags that several commands share (the analysis settings, the reference arm, the error
budgets), written once so that every command says and defaults them the same. Command modules
import this module as `opt` and annotate with `opt.Reference` and so on; the analysis
commands take the settings flags they share as one parameter (`settings_flags`)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar, get_type_hints

import typer

from flatscore import defaults
from flatscore.cli import legacy
from flatscore.cli.flags import flagged
from flatscore.errors import InputError

if TYPE_CHECKING:
    from pydantic import BaseModel

    from flatscore.analysis.settings import AnalysisSettings

Command = TypeVar("Command", bound=Callable[..., Any])
Model = TypeVar("Model", bound="BaseModel")
Settings = TypeVar("Settings", bound="AnalysisSettings")


def settings_from_flags(cls: type[Settings], **values: Any) -> Settings:
    """`cls.from_flags(**values)`, a bad value's error naming its flag."""
    try:
        return cls.from_flags(**values)
    except InputError as exc:
        raise flagged(exc, every=True) from None


def analysis_settings(**values: Any) -> AnalysisSettings:
    """`AnalysisSettings` from command-line flags, a bad value's error naming its flag."""
    from flatscore.analysis.settings import AnalysisSettings

    return settings_from_flags(AnalysisSettings, **values)


Runs = Annotated[
    list[Path],
    typer.Argument(help="Run folders (their *.jsonl), JSONL runs, or τ² results files/dirs."),
]

REFERENCE_HELP = "Reference arm"
"""`--reference` wherever it is an option: the arm the others are compared with (a name in the
run files). `margins` names the precision of its reference logits `--reference-logits`."""
Reference = Annotated[
    str | None, typer.Option(help=f"{REFERENCE_HELP} (default: highest precision).")
]
GateReference = Annotated[
    str | None,
    typer.Option(
        "--reference",
        "--reference-arm",
        help=f"{REFERENCE_HELP} (the one in REFERENCE, when it holds several; "
        f"--reference-arm: {legacy.NOTE}).",
    ),
]
"""`gate`'s reference arm: its positional REFERENCE is the runs that hold it."""
GateCandidate = Annotated[
    str | None,
    typer.Option(
        "--candidate",
        "--candidate-arm",
        help=f"Candidate arm (the one in CANDIDATE, when it holds several; "
        f"--candidate-arm: {legacy.NOTE}).",
    ),
]
Budgets = Annotated[
    str | None, typer.Option(help="Error budgets K, e.g. 0-10 or 0,2,9 (default 0..default K).")
]
Count = Annotated[
    str, typer.Option(help="Errors counted for S(K): all (agent + user, like τ²) or agent.")
]
TOST_MARGIN_POINTS = defaults.TOST_MARGIN * 100
"""`--tost-margin`'s default: the settings' margin, in the points the flag is written in."""
_TOST_MARGIN_HELP = "TOST equivalence margin, in points"
TostMargin = Annotated[
    float,
    typer.Option("--tost-margin", help=f"{_TOST_MARGIN_HELP} (7.5 = ±7.5 points of success)."),
]
GateTostMargin = Annotated[
    float,
    typer.Option(
        "--tost-margin",
        "--margin",
        help=f"{_TOST_MARGIN_HELP} {legacy.deprecated('--margin')}.",
    ),
]
"""`gate`'s `--tost-margin`, which also accepts its old spelling `--margin`."""
TightBudget = Annotated[
    int,
    typer.Option(
        "--tight-budget",
        min=0,
        help="The tight error budget K the verdict tests besides the default (where a hidden "
        "gap shows).",
    ),
]
JsonOut = Annotated[
    Path | None,
    typer.Option("--json", help="Also write the result as JSON to this path ('-': stdout)."),
]
Bootstrap = Annotated[int, typer.Option(help="Bootstrap resamples.")]
BootstrapSeed = Annotated[int, typer.Option(help="Bootstrap seed.")]
Correction = Annotated[str, typer.Option(help="Multiple-testing correction: holm or bh.")]
Dedupe = Annotated[bool, typer.Option(help="Keep one copy of duplicate episodes (with a warning).")]
ChannelRules = Annotated[
    Path | None, typer.Option(help="YAML error-text rules (replaces the bundled ones).")
]
Balanced = Annotated[
    bool,
    typer.Option(help="Only the (domain, task, trial) every arm of a cell has (a study cut short)"),
]
Sequential = Annotated[
    bool,
    typer.Option(
        help="Also decide each comparison as a sequential study would have, and after how "
        "many tasks (docs/analysis.md, 'Sequential verdicts')."
    ),
]
FixedDesign = Annotated[
    bool,
    typer.Option(
        help="Read a sequential run's files as a fixed design (by default a run that "
        "stopped sequentially is read sequentially, as it was run)."
    ),
]
Trials = Annotated[
    str | None,
    typer.Option(
        "--trial-range",
        "--trials",
        help="Only these trials, counted from 1 (e.g. 1-2): pins an analysis to the trials it "
        f"read while a study goes on {legacy.deprecated('--trials')}",
    ),
]
"""A range of trials read. `--trials` is a count wherever a command runs episodes (`run`,
`power`); here it is the old spelling."""
ProgressBar = Annotated[bool, typer.Option(help="Show a progress bar.")]
ProgressBars = Annotated[bool, typer.Option(help="Show progress bars.")]
TorchThreads = Annotated[int, typer.Option(min=1, help="torch threads.")]

SETTINGS_FLAGS: dict[str, tuple[Any, Any]] = {
    "count": (Count, defaults.COUNT),
    "tost_margin": (TostMargin, TOST_MARGIN_POINTS),
    "tight_budget": (TightBudget, defaults.TIGHT_K),
    "bootstrap": (Bootstrap, defaults.BOOTSTRAP),
    "seed": (BootstrapSeed, defaults.ANALYSIS_SEED),
    "correction": (Correction, defaults.CORRECTION),
}
"""The analysis settings' flags that `analyze`, `report` and `export model-card` take alike:
annotation and default, in the order --help lists them."""


def settings_flags(*leave_out: str) -> Callable[[Command], Command]:
    """The command takes `SETTINGS_FLAGS` (less `leave_out`) where its parameter
    `flags: dict[str, Any]` stands (so --help lists them there), and receives their values
    as that dict, keyed by `AnalysisSettings.from_flags`'s names; a flag left at its default
    is None there, so the settings built from it leave it unset and a study's recorded
    setting (`analysis.recorded`) may fill it."""
    names = [name for name in SETTINGS_FLAGS if name not in leave_out]

    def decorate(func: Command) -> Command:
        hints = get_type_hints(func, include_extras=True)
        params: list[inspect.Parameter] = []
        for p in inspect.signature(func).parameters.values():
            if p.name != "flags":
                params.append(p.replace(annotation=hints[p.name]))
                continue
            for name in names:
                annotation, default = SETTINGS_FLAGS[name]
                params.append(
                    inspect.Parameter(name, p.kind, default=default, annotation=annotation)
                )

        @functools.wraps(func)
        def command(**values: Any) -> Any:
            flags = {name: values.pop(name) for name in names}
            given = _given(flags)
            flags = {name: v if name in given else None for name, v in flags.items()}
            return func(**values, flags=flags)

        command.__signature__ = inspect.Signature(params, return_annotation=None)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params}
        return command  # type: ignore[return-value]

    return decorate


def _given(flags: dict[str, Any]) -> set[str]:
    """The flags given a value other than their default: the others are left for a study's
    recorded settings to fill (`analysis.recorded`); a flag given its default value reads
    the same either way unless the study recorded another value."""
    return {n for n, v in flags.items() if v != SETTINGS_FLAGS[n][1]}


def model_from(model: type[Model], values: Mapping[str, Any]) -> Model:
    """`model` built from the command's parameters that are named as its fields (pass
    `locals()`): options a command only passes through are said once, in its signature.
    Fields the command does not take keep the model's defaults."""
    return model.model_validate(
        {name: values[name] for name in model.model_fields if name in values}
    )
