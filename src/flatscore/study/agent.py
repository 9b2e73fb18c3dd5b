"""What a study says of an arm's agent beyond its model: planted damage (`InjectSpec`, run
by `flatscore.agents.inject`) and reflective repair (`RepairConfig`, run by
`flatscore.agents.repair`)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from flatscore import defaults
from flatscore.analysis.channels import LEAF_CHANNELS, UNKNOWN_TOOL_LEAVES
from flatscore.strict import StrictModel


class InjectRates(StrictModel):
    """How often each kind of damage is planted in an agent tool call."""

    role_confusion: float = Field(0.0, ge=0.0, le=1.0)
    drop_argument: float = Field(0.0, ge=0.0, le=1.0)
    wrong_value: float = Field(0.0, ge=0.0, le=1.0)


class InjectSpec(InjectRates):
    """A planted-damage arm: `base` (another arm of the same model) perturbed at run time."""

    base: str = Field(min_length=1)


REPAIR_CHANNELS: tuple[str, ...] = ("unknown_tool", *LEAF_CHANNELS)
"""Channels repair can trigger on; `unknown_tool` stands for all of UNKNOWN_TOOL_LEAVES."""


class RepairConfig(BaseModel):
    """How repair runs: the one repair model. A study's `repair` section extends it with
    `mode` (`flatscore.study.RepairSpec`), an arm's recipe carries it as it is, and every
    repaired episode's metadata records it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    channels: list[str] = Field(
        default_factory=lambda: list(defaults.REPAIR_TRIGGER_CHANNELS), min_length=1
    )
    attempts: int = Field(
        defaults.REPAIR_ATTEMPTS, ge=1, description="instructions per failure chain"
    )

    @field_validator("channels")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        bad = [c for c in value if c not in REPAIR_CHANNELS]
        if bad:
            raise ValueError(
                f"unknown repair channel(s) {', '.join(bad)} (known: {', '.join(REPAIR_CHANNELS)})"
            )
        return list(dict.fromkeys(value))

    def matches(self, channel: str) -> bool:
        """Whether a leaf channel is one repair triggers on."""
        if channel in self.channels:
            return True
        return channel in UNKNOWN_TOOL_LEAVES and "unknown_tool" in self.channels
