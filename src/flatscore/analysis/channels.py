"""Which channel a failed agent call belongs to (docs/analysis.md "Definitions", first match wins).

Order: the channel the environment recorded (`tool_result.error_kind`), then the name test
(a name that is not one of the agent's tools is `unknown_tool`), then unparseable arguments
(`bad_arguments`), then the error-text rules from YAML (per domain, then defaults), else
`other`. `unknown_tool` is finally split by the name rules (`NameRules`, first match wins):
`role_confusion` (a user tool), `near_miss` (a variant of an agent tool), `invented` (an
identifier), else `not_a_name`. The patterns live in data (`channel_rules.yaml`), not in code.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cached_property, partial
from importlib import resources
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator
from rapidfuzz.distance import DamerauLevenshtein

from flatscore.episode import Episode, ToolCall, ToolResult
from flatscore.errors import InputError

BaseChannel = Literal["unknown_tool", "bad_arguments", "entity_not_found", "precondition", "other"]
BASE_CHANNELS: frozenset[str] = frozenset(
    {"unknown_tool", "bad_arguments", "entity_not_found", "precondition", "other"}
)
UNKNOWN_TOOL_LEAVES: tuple[str, ...] = ("role_confusion", "near_miss", "invented", "not_a_name")
"""The parts of `unknown_tool`, in precedence order (docs/analysis.md, "Definitions")."""
LEAF_CHANNELS: tuple[str, ...] = (
    *UNKNOWN_TOOL_LEAVES,
    "bad_arguments",
    "entity_not_found",
    "precondition",
    "other",
    "malformed_output",
)
"""Channels every failure lands in exactly once (`unknown_tool` is the sum of the first four)."""

CHANNELS: tuple[str, ...] = ("unknown_tool", *LEAF_CHANNELS)
"""Every channel reported, in display order. `unknown_tool` = the sum of UNKNOWN_TOOL_LEAVES."""

BUILTIN_RULES = "builtin:flatscore/analysis/channel_rules.yaml"


def _regex(value: str) -> str:
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"not a valid regex: {exc}") from None
    return value


class ChannelRule(BaseModel):
    model_config = ConfigDict(extra="forbid")

    channel: BaseChannel
    pattern: str

    _compiles = field_validator("pattern")(_regex)


class NameRules(BaseModel):
    """How a name that is not one of the agent's tools is split (first match wins):
    `role_confusion` (one of the user's tools), `near_miss` (a `near_miss_shape` name whose
    normalised form equals an agent tool's, or is within `near_miss_distance` edits of one at
    least `near_miss_min_length` long), `invented` (matches an `identifier` pattern once
    `strip` is removed), else `not_a_name`. Normalised: `strip` removed, camelCase humps and
    `separators` turned into `_`, lowercased, one trailing `s` and `_` dropped."""

    model_config = ConfigDict(extra="forbid")

    strip: str = r"^\s+|\(\s*\)?\s*$|\s+$"
    separators: str = r"[\s.\-]+"
    near_miss_shape: str = r"^[A-Za-z][A-Za-z0-9_.\- ]*$"
    near_miss_distance: int = Field(2, ge=0)
    near_miss_min_length: int = Field(6, ge=1)
    identifier: list[str] = Field(
        default_factory=lambda: [r"^[a-z][a-z0-9]*([_.][a-z0-9]+|[A-Z][a-z0-9]*)*_?$"]
    )

    _check = field_validator("strip", "separators", "near_miss_shape")(_regex)
    _memo: dict[tuple[str, frozenset[str], frozenset[str]], str] = PrivateAttr(default_factory=dict)

    @field_validator("identifier")
    @classmethod
    def _identifiers(cls, value: list[str]) -> list[str]:
        return [_regex(v) for v in value]

    def bare(self, name: str) -> str:
        """The name without surrounding space and a trailing call `()`."""
        return re.sub(self.strip, "", name)

    def normalise(self, name: str) -> str:
        """The form variants compare in: `Change-Plans` and `changePlans` → `change_plan`."""
        s = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", self.bare(name))
        s = re.sub(self.separators, "_", s).lower().rstrip("_")
        return s[:-1] if s.endswith("s") and len(s) > 1 else s

    def split(self, name: str, agent_tools: frozenset[str], user_tools: frozenset[str]) -> str:
        """Which part of `unknown_tool` a name not among the agent's tools belongs to
        (memoised: a study repeats its few hundred names thousands of times)."""
        key = (name, agent_tools, user_tools)
        if key not in self._memo:
            self._memo[key] = self._split(name, agent_tools, user_tools)
        return self._memo[key]

    def _split(self, name: str, agent_tools: frozenset[str], user_tools: frozenset[str]) -> str:
        if name in user_tools:
            return "role_confusion"
        bare = self.bare(name)
        if re.match(self.near_miss_shape, bare):
            norm = self.normalise(name)
            for tool in agent_tools:
                target = self.normalise(tool)
                if norm == target or (
                    len(tool) >= self.near_miss_min_length
                    and DamerauLevenshtein.distance(
                        norm, target, score_cutoff=self.near_miss_distance
                    )
                    <= self.near_miss_distance
                ):
                    return "near_miss"
        if any(re.match(p, bare) for p in self.identifier):
            return "invented"
        return "not_a_name"


class ChannelRules(BaseModel):
    """Error-text rules (a domain's own list first, then `defaults`) and the name rules that
    split `unknown_tool`."""

    model_config = ConfigDict(extra="forbid")

    version: int = 1
    defaults: list[ChannelRule] = Field(default_factory=list)
    names: NameRules = Field(default_factory=NameRules)
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
    if kind == "role_confusion":
        return kind
    base: str
    if kind in UNKNOWN_TOOL_LEAVES:
        base = "unknown_tool"
    elif kind in BASE_CHANNELS:
        base = kind
    elif agent_tools and call.name not in agent_tools:
        base = "unknown_tool"
    elif not call.arguments_parsed:
        base = "bad_arguments"
    else:
        base = rules.match(domain, result.text) or "other"
    if base == "unknown_tool":
        return rules.names.split(call.name, agent_tools, user_tools)
    return base
