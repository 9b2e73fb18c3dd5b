"""Which channel a failed agent call belongs to (docs/analysis.md "Definitions", first match wins).

Order: the channel the environment recorded (`tool_result.error_kind`), then the name test
(a name that is not one of the agent's tools is `unknown_tool`), then unparseable arguments
(`bad_arguments`), then the error-text rules from YAML (per domain, then defaults), else
`other`. `unknown_tool` is finally split by the user's tool list into `role_confusion` and
`invented`. The patterns live in data (`channel_rules.yaml`), not in code.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cached_property, partial
from importlib import resources
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from flatscore.episode import Episode, ToolCall, ToolResult
from flatscore.errors import InputError

BaseChannel = Literal["unknown_tool", "bad_arguments", "entity_not_found", "precondition", "other"]
BASE_CHANNELS: frozenset[str] = frozenset(
    {"unknown_tool", "bad_arguments", "entity_not_found", "precondition", "other"}
)
LEAF_CHANNELS: tuple[str, ...] = (
    "role_confusion",
    "invented",
    "bad_arguments",
    "entity_not_found",
    "precondition",
    "other",
    "malformed_output",
)
"""Channels every failure lands in exactly once (`unknown_tool` is the sum of the first two)."""

CHANNELS: tuple[str, ...] = ("unknown_tool", *LEAF_CHANNELS)
"""Every channel reported, in display order. `unknown_tool` = `role_confusion` + `invented`."""

BUILTIN_RULES = "builtin:flatscore/analysis/channel_rules.yaml"


class ChannelRule(BaseModel):
    model_config = ConfigDict(extra="forbid")

    channel: BaseChannel
    pattern: str

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a valid regex: {exc}") from None
        return value


class ChannelRules(BaseModel):
    """Error-text rules: a domain's own list first, then `defaults`."""

    model_config = ConfigDict(extra="forbid")

    version: int = 1
    defaults: list[ChannelRule] = Field(default_factory=list)
    domains: dict[str, list[ChannelRule]] = Field(default_factory=dict)
    source: str = BUILTIN_RULES

    @cached_property
    def _compiled(self) -> dict[str | None, list[tuple[re.Pattern[str], str]]]:
        def comp(rules: list[ChannelRule]) -> list[tuple[re.Pattern[str], str]]:
            return [(re.compile(r.pattern, re.IGNORECASE), r.channel) for r in rules]

        table: dict[str | None, list[tuple[re.Pattern[str], str]]] = {None: comp(self.defaults)}
        for domain, rules in self.domains.items():
            table[domain] = comp(rules) + table[None]
        return table

    def match(self, domain: str, text: str) -> str | None:
        """The channel of the first rule whose pattern occurs in `text`, or None."""
        rules = self._compiled.get(domain, self._compiled[None])
        for pattern, channel in rules:
            if pattern.search(text):
                return channel
        return None


def load_rules(path: str | Path | None = None) -> ChannelRules:
    """The bundled rules, or a user's YAML file of the same layout (bad file: InputError)."""
    if path is None:
        text = (
            resources.files("flatscore.analysis").joinpath("channel_rules.yaml").read_text("utf-8")
        )
        source = BUILTIN_RULES
    else:
        p = Path(path)
        if not p.exists():
            raise InputError("channel rules file not found", file=str(p))
        text = p.read_text("utf-8")
        source = str(p)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InputError(f"not valid YAML ({exc})", file=source) from None
    if not isinstance(data, dict):
        raise InputError("expected a mapping with 'defaults' and 'domains'", file=source)
    try:
        rules = ChannelRules.model_validate({**data, "source": source})
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise InputError(str(err["msg"]), file=source, field=loc) from None
    return rules


def episode_classifier(
    episode: Episode, rules: ChannelRules
) -> Callable[[ToolCall, ToolResult], str]:
    """`classify_failed_call` bound to one episode's domain and tool lists (built once)."""
    return partial(
        classify_failed_call,
        domain=episode.domain,
        agent_tools=frozenset(episode.tools.agent),
        user_tools=frozenset(episode.tools.user),
        rules=rules,
    )


def classify_failed_call(
    call: ToolCall,
    result: ToolResult,
    *,
    domain: str,
    agent_tools: frozenset[str],
    user_tools: frozenset[str],
    rules: ChannelRules,
) -> str:
    """The leaf channel (one of LEAF_CHANNELS except malformed_output) of a failed agent call."""
    kind = result.error_kind
    if kind in ("role_confusion", "invented"):
        return kind
    base: str
    if kind in BASE_CHANNELS:
        base = kind
    elif agent_tools and call.name not in agent_tools:
        base = "unknown_tool"
    elif not call.arguments_parsed:
        base = "bad_arguments"
    else:
        base = rules.match(domain, result.text) or "other"
    if base == "unknown_tool":
        return "role_confusion" if call.name in user_tools else "invented"
    return base
