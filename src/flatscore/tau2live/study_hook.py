"""The one place a study meets its τ²-bench domains: `flatscore.study_run.run_study` runs
the built-in domains as before and hands the `tau2:` ones to `run_tau2_domains`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from flatscore.tau2live.spec import is_tau2_domain

if TYPE_CHECKING:
    from rich.console import Console

    from flatscore.study import Study
    from flatscore.tau2live.runner import Tau2Outcome


def builtin_study(study: Study) -> Study | None:
    """The study restricted to its built-in domains (None when it has only τ² ones)."""
    names = [d for d in study.domains if not is_tau2_domain(d)]
    if len(names) == len(study.domains):
        return study
    return study.model_copy(update={"domains": names}) if names else None


def run_tau2_domains(
    study: Study, *, resume: bool, progress: bool, console: Console | None
) -> Tau2Outcome | None:
    """Run the study's `tau2:` domains (None when it has none)."""
    if not any(is_tau2_domain(d) for d in study.domains):
        return None
    from flatscore.tau2live.runner import run_tau2_study

    return run_tau2_study(study, resume=resume, progress=progress, console=console)
