"""The quick form of `flatscore run` (`--domain retail --agent oracle --out run.jsonl`, like
τ²'s `tau2 run`) as what it is: a one-model study held in memory.

`QuickRun` is the quick form's settings, typed; `QuickRun.to_study()` turns them into a
`Study` with one model (`kind: agent`, named after the agent) and one arm (`--arm`, default
the agent's name), and `run_quick` runs it through the study planner and executors
(`flatscore.run.driver.run_study`) with every episode appended to the one `--out` file. So
the quick form and a study file share one writer, one resume, one progress bar, one
episode id and one set of defaults (`flatscore.defaults`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field
from rich.console import Console

from flatscore import defaults
from flatscore.agents.base import agent_names, make_agent
from flatscore.domains import domain_names
from flatscore.errors import InputError, validating
from flatscore.run.checks import check_study
from flatscore.run.driver import StudyOutcome, run_study
from flatscore.study import ErrorBudgetSpec, RepairSpec, RunSettings, Study
from flatscore.users.base import user_names


class QuickRun(RunSettings, ErrorBudgetSpec):
    """What the quick form runs: one registered agent (with options) on built-in domains.
    The settings it shares with a study file are the study's own (`RunSettings`, the error
    budget, `RepairSpec`): declared once, with their defaults."""

    agent: str = "oracle"
    agent_options: dict[str, Any] = Field(default_factory=dict)
    user: str = "scripted"
    domains: list[str] = Field(default_factory=lambda: ["all"], min_length=1)
    study: str = Field(defaults.QUICK_STUDY_NAME, min_length=1)
    arm: str | None = Field(None, description="the arm label (default: the agent's name)")
    repair: RepairSpec = Field(default_factory=RepairSpec)

    @classmethod
    def parse(cls, **settings: Any) -> QuickRun:
        """Validated settings; a bad value raises one `InputError` naming the setting."""
        with validating(field=_flag):
            quick = cls(**settings)
        quick.check()
        return quick

    def check(self) -> None:
        """Names that need the registries, reported with the flag a person typed."""
        known = domain_names()
        for name in self.domains:
            if name != "all" and name not in known:
                raise InputError(f"unknown domain {name!r} (known: {', '.join(known)}, all)")
        if self.agent not in agent_names():
            raise InputError(f"unknown agent {self.agent!r} (known: {', '.join(agent_names())})")
        try:
            make_agent(self.agent, **self.agent_options)
        except (TypeError, ValueError) as exc:
            raise InputError(f"agent {self.agent!r}: {exc}", field="--agent-opt") from None
        if self.user not in user_names():
            raise InputError(f"unknown user {self.user!r} (known: {', '.join(user_names())})")
        if self.user != "scripted":
            raise InputError(f"user {self.user!r} needs a model backend: use it from a study file")

    def to_study(self) -> Study:
        """The one-model study these settings describe."""
        label = self.arm or self.agent
        domains = domain_names() if "all" in self.domains else self.domains
        study = Study.model_validate(
            {
                **self.model_dump(include=set(RunSettings.model_fields)),
                "name": self.study,
                "models": [
                    {
                        "name": self.agent,
                        "kind": "agent",
                        "agent": self.agent,
                        "arms": {label: {"options": self.agent_options}},
                    }
                ],
                "domains": domains,
                "error_budget": self.model_dump(include=set(ErrorBudgetSpec.model_fields)),
                "user": {"kind": self.user},
                "repair": self.repair.model_dump(),
            }
        )
        check_study(study, field=_flag)
        return study


def _flag(loc: tuple[str | int, ...]) -> str:
    """The setting a validation error names: a repair setting as its flag."""
    if len(loc) > 1 and loc[0] == "repair":
        return f"--repair-{loc[1]}"
    return ".".join(map(str, loc))


def run_quick(
    quick: QuickRun,
    out: str | Path,
    *,
    resume: bool = False,
    progress: bool = True,
    console: Console | None = None,
) -> StudyOutcome:
    """Run the quick form's one-model study into `out` (resumable; no report)."""
    return run_study(
        quick.to_study(),
        resume=resume,
        progress=progress,
        report=False,
        console=console,
        run_file=Path(out),
    )
