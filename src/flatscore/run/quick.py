"""The quick form of `flatscore run` (`--domain retail --agent oracle --out run.jsonl`, like
τ²'s `tau2 run`) as what it is: a one-model study held in memory.

`QuickRun` is the quick form's settings, typed; `QuickRun.study()` turns them into a
`Study` with one model (`kind: agent`, named after the agent) and one arm (`--arm`, default
the agent's name), and `run_quick` runs it through the study planner and executors
(`flatscore.run.driver.run_study`) with every episode appended to the one `--out` file. So
the quick form and a study file share one writer, one resume, one progress bar, one
episode id and one set of defaults (`flatscore.defaults`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field
from rich.console import Console

from flatscore import defaults
from flatscore.agents.base import agent_names, make_agent
from flatscore.agents.repair import RepairConfig
from flatscore.domains import domain_names
from flatscore.errors import InputError, validating
from flatscore.run.driver import StudyOutcome, run_study
from flatscore.run.study import Study, check_names
from flatscore.strict import StrictModel
from flatscore.users.base import user_names


class QuickRun(StrictModel):
    """What the quick form runs: one registered agent (with options) on built-in domains."""

    agent: str = "oracle"
    agent_options: dict[str, Any] = Field(default_factory=dict)
    user: str = "scripted"
    domains: list[str] = Field(default_factory=lambda: ["all"], min_length=1)
    split: Literal["train", "test", "all"] = defaults.SPLIT
    task_ids: list[str] | None = None
    trials: int = Field(defaults.TRIALS, ge=1)
    seed: int = defaults.SEED
    max_steps: int = Field(defaults.MAX_STEPS, ge=1)
    max_errors: int = Field(defaults.MAX_ERRORS, ge=1)
    counted: Literal["all", "agent"] = defaults.COUNTED
    timeout_s: float | None = Field(None, gt=0)
    concurrency: int = Field(defaults.CONCURRENCY, ge=1)
    study: str = Field(defaults.QUICK_STUDY_NAME, min_length=1)
    arm: str | None = Field(None, description="the arm label (default: the agent's name)")
    repair: bool = False
    repair_channels: list[str] = Field(default_factory=lambda: list(defaults.REPAIR_CHANNELS))
    repair_attempts: int = Field(defaults.REPAIR_ATTEMPTS, ge=1)

    @classmethod
    def parse(cls, **settings: Any) -> QuickRun:
        """Validated settings; a bad value raises one `InputError` naming the setting."""
        with validating():
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
        if self.repair:
            with validating(field=lambda loc: f"--repair-{loc[0]}"):
                RepairConfig(channels=self.repair_channels, attempts=self.repair_attempts)

    def to_study(self) -> Study:
        """The one-model study these settings describe."""
        label = self.arm or self.agent
        domains = domain_names() if "all" in self.domains else self.domains
        study = Study.model_validate(
            {
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
                "split": self.split,
                "task_ids": self.task_ids,
                "trials": self.trials,
                "seed": self.seed,
                "max_steps": self.max_steps,
                "timeout_s": self.timeout_s,
                "error_budget": {"max_errors": self.max_errors, "counted": self.counted},
                "user": {"kind": self.user},
                "repair": {
                    "mode": "on" if self.repair else "off",
                    "channels": self.repair_channels,
                    "attempts": self.repair_attempts,
                },
                "concurrency": self.concurrency,
            }
        )
        check_names(study)
        return study


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
