"""What `flatscore margins` writes (margins.json) and how it is read back (its table:
`flatscore.report.effect_tables`).

The models live in the analysis package because analysis.json can carry a margins result;
producing one (teacher-forcing transcripts through a model) is `flatscore.run.margins`."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from flatscore.analysis.margins import ArmMargins, MarginDistribution
from flatscore.errors import InputError

DEFINITIONS = {
    "agent_tokens": "tokens of the agent's turns in the rendered transcript (message bodies "
    "and the closing <|im_end|>), teacher-forced",
    "reference_margin": "top-1 minus top-2 raw logit of the reference arm at that position",
    "flip": "the arm's top-1 token differs from the reference arm's top-1 token",
    "decision_tokens": "tokens overlapping a tool name inside a tool call the agent wrote",
    "alternative": "the name text before a flipped decision token + the arm's top-1 token, "
    "classified as a prefix of an agent tool, of a user tool (role confusion), or neither "
    "(invented); linked to names hallucinated anywhere in the run",
}


class Unavailable(BaseModel):
    model_config = ConfigDict(extra="forbid")

    arm: str
    reason: str


class MarginsResult(BaseModel):
    """What `flatscore margins` writes (margins.json); add fields, never rename."""

    model_config = ConfigDict(extra="forbid")

    model: str
    model_description: str
    runs: list[str]
    transcripts_arm: str
    reference_arm: str
    episodes: list[str]
    agent_tokens: int
    decision_tokens: int
    edges: list[float | None]
    reference_agent_margins: MarginDistribution
    reference_decision_margins: MarginDistribution
    arms: list[ArmMargins]
    unavailable: list[Unavailable] = Field(default_factory=list)
    definitions: dict[str, str] = Field(default_factory=lambda: dict(DEFINITIONS))
    notes: list[str] = Field(default_factory=list)


def load_margins(path: Path) -> MarginsResult:
    """Read a margins.json written by `flatscore margins` (bad input: one clear InputError)."""
    from pydantic import ValidationError

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror})", file=str(path)) from None
    try:
        return MarginsResult.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise InputError(
            str(first["msg"]),
            file=str(path),
            field=".".join(str(p) for p in first["loc"]) or None,
        ) from None
