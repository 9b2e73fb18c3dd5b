"""Logit margins: why quantization flips some decisions and not others.

The study behind flatscore explained amplified failures by margins — quantization noise flips
a decision only where the reference's top-1 barely beats its top-2 — but could not measure
it. Given per-position logits of the reference and of an arm over the same teacher-forced
tokens, this module computes, for each agent-written token:

- the **reference margin** = top-1 logit − top-2 logit of the reference (raw logits, ≥ 0);
- whether it **flipped**: the arm's top-1 token differs from the reference's top-1;

and summarises them: the **flip rate by reference-margin bin**, the **margin distribution at
decision tokens** (the tokens that spell a tool name in a call), and, for decisions that
flipped, **which alternative won**, classified against the tool lists: another valid agent
tool, a user tool (role confusion) or no tool at all (an invented name), and linked to the
names that show up as hallucinations in the run's episodes.

Pure numpy on arrays (torch tensors are accepted and converted), so it is tested on tiny
hand-made fixtures; `flatscore.run.margins` produces the arrays from a model.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

DEFAULT_EDGES: tuple[float, ...] = (0.0, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, float("inf"))
"""Reference-margin bin edges in logits (left-closed, right-open)."""

AlternativeKind = Literal["agent_tool", "user_tool", "invented", "unresolved"]


def _array(x: Any) -> np.ndarray:
    if hasattr(x, "detach"):  # a torch tensor
        x = x.detach().float().cpu().numpy()
    return np.asarray(x)


@dataclass(frozen=True)
class TokenMargins:
    """Per-position arrays (one row per teacher-forced position)."""

    ref_margin: np.ndarray  # float, top-1 − top-2 of the reference logits
    ref_top1: np.ndarray  # int
    ref_top2: np.ndarray  # int
    arm_top1: np.ndarray  # int
    arm_gap: np.ndarray  # float, arm logit of its top-1 − arm logit of the ref's top-1 (≥ 0)

    @property
    def flipped(self) -> np.ndarray:
        return self.arm_top1 != self.ref_top1


def reference_top2(ref_logits: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(margin, top-1 ids, top-2 ids) of [N, V] reference logits. Ties give margin 0 and
    the lower token id as top-1 (argmax order)."""
    logits = _array(ref_logits).astype(np.float64)
    if logits.ndim != 2 or logits.shape[1] < 2:
        raise ValueError("reference logits must be [positions, vocab ≥ 2]")
    top1 = np.argmax(logits, axis=1)
    rows = np.arange(logits.shape[0])
    masked = logits.copy()
    masked[rows, top1] = -np.inf
    top2 = np.argmax(masked, axis=1)
    return logits[rows, top1] - logits[rows, top2], top1, top2


def arm_against(
    reference: tuple[np.ndarray, np.ndarray, np.ndarray], arm_logits: Any
) -> TokenMargins:
    """Flips of one arm against the reference's `reference_top2` result (so the reference's
    full logits need not be kept while every arm runs)."""
    margin, top1, top2 = reference
    arm = _array(arm_logits).astype(np.float64)
    if arm.ndim != 2 or arm.shape[0] != margin.shape[0]:
        raise ValueError(
            f"arm logits {arm.shape} do not match {margin.shape[0]} reference positions"
        )
    arm_top1 = np.argmax(arm, axis=1)
    rows = np.arange(arm.shape[0])
    return TokenMargins(margin, top1, top2, arm_top1, arm[rows, arm_top1] - arm[rows, top1])


def token_margins(ref_logits: Any, arm_logits: Any) -> TokenMargins:
    """Margins and flips of one arm against the reference over the same positions."""
    ref, arm = _array(ref_logits), _array(arm_logits)
    if ref.shape != arm.shape:
        raise ValueError(f"logit shapes differ: reference {ref.shape}, arm {arm.shape}")
    return arm_against(reference_top2(ref), arm)


# ---------------------------------------------------------------- summaries


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MarginBin(_Model):
    """Reference margins in [lo, hi): how many tokens, how many flipped."""

    lo: float
    hi: float | None  # None: +inf
    tokens: int
    flips: int
    flip_rate: float | None


class MarginDistribution(_Model):
    """Quantiles and a histogram (same bins as the flip curve) of reference margins."""

    count: int
    mean: float | None
    p10: float | None
    p25: float | None
    median: float | None
    p75: float | None
    p90: float | None
    below_0_5: float | None = Field(description="share of margins < 0.5 logits")
    histogram: list[int]


def flip_rate_by_margin(
    margin: Any, flipped: Any, edges: Sequence[float] = DEFAULT_EDGES
) -> list[MarginBin]:
    """Flip rate per reference-margin bin [edges[i], edges[i+1])."""
    m = _array(margin).astype(np.float64)
    f = _array(flipped).astype(bool)
    out = []
    for lo, hi in itertools.pairwise(edges):
        inside = (m >= lo) & (m < hi)
        n = int(inside.sum())
        k = int((inside & f).sum())
        out.append(
            MarginBin(
                lo=float(lo),
                hi=float(hi) if np.isfinite(hi) else None,
                tokens=n,
                flips=k,
                flip_rate=k / n if n else None,
            )
        )
    return out


def margin_distribution(margin: Any, edges: Sequence[float] = DEFAULT_EDGES) -> MarginDistribution:
    m = _array(margin).astype(np.float64)
    hist = [int(((m >= lo) & (m < hi)).sum()) for lo, hi in itertools.pairwise(edges)]
    if m.size == 0:
        return MarginDistribution(
            count=0,
            mean=None,
            p10=None,
            p25=None,
            median=None,
            p75=None,
            p90=None,
            below_0_5=None,
            histogram=hist,
        )
    q = np.quantile(m, [0.1, 0.25, 0.5, 0.75, 0.9])
    return MarginDistribution(
        count=int(m.size),
        mean=float(m.mean()),
        p10=float(q[0]),
        p25=float(q[1]),
        median=float(q[2]),
        p75=float(q[3]),
        p90=float(q[4]),
        below_0_5=float((m < 0.5).mean()),
        histogram=hist,
    )


# ---------------------------------------------------------------- flipped decisions


class Alternative(_Model):
    """What a flipped decision token would have started instead of the reference's name."""

    kind: AlternativeKind
    names: list[str] = Field(description="tool names the alternative prefix can still spell")
    hallucinated: list[str] = Field(
        description="of those, names that appear as hallucinated calls in the run's episodes"
    )


def classify_alternative(
    text: str,
    agent_tools: Iterable[str],
    user_tools: Iterable[str] = (),
    hallucinated: Iterable[str] = (),
) -> Alternative:
    """Classify the name the arm would start writing: `text` is the name's text before the
    flipped token + the arm's token (a leading quote or space is ignored). If the text closes
    the name (a `"` follows it), the name is complete and must match exactly; otherwise it is
    a prefix. It is `agent_tool` when it can still spell an agent tool, else `user_tool` when
    it can spell one of the user's tools (role confusion), else `invented`; `unresolved` when
    no name text is left (the token leaves the name)."""
    body = text.lstrip().lstrip('"')
    closed = '"' in body
    p = body.split('"', 1)[0]

    def fits(name: str) -> bool:
        return name == p if closed else name.startswith(p)

    halluc = sorted({n for n in hallucinated if p and fits(n)})
    if not p:
        return Alternative(kind="unresolved", names=[], hallucinated=halluc)
    agent = sorted(n for n in agent_tools if fits(n))
    if agent:
        return Alternative(kind="agent_tool", names=agent, hallucinated=halluc)
    user = sorted(n for n in user_tools if fits(n))
    if user:
        return Alternative(kind="user_tool", names=user, hallucinated=halluc)
    return Alternative(kind="invented", names=[], hallucinated=halluc)


class FlippedDecision(_Model):
    """One decision token where the arm's top-1 differs from the reference's."""

    episode_id: str
    message_index: int
    reference_name: str
    name_offset: int = Field(description="index of the token within the name's tokens")
    ref_token: str
    arm_token: str
    ref_margin: float
    arm_gap: float
    alternative: Alternative


class ArmMargins(_Model):
    """One arm against the reference over every agent-written token."""

    arm: str
    agent_tokens: int
    flips: int
    flip_rate: float | None
    flip_by_margin: list[MarginBin]
    decision_tokens: int
    decision_flips: int
    decision_flip_rate: float | None
    decision_flip_by_margin: list[MarginBin]
    flipped_margin_max: float | None = Field(description="largest reference margin that flipped")
    flipped_decisions: list[FlippedDecision]
    alternative_kinds: dict[str, int]
    winning_alternatives: dict[str, int] = Field(
        description="arm top-1 token text at flipped decision tokens → count"
    )


def summarize_arm(
    arm: str,
    margins: TokenMargins,
    decision: Any,
    flipped_decisions: list[FlippedDecision],
    edges: Sequence[float] = DEFAULT_EDGES,
) -> ArmMargins:
    """Summary of one arm from its concatenated per-token arrays (agent tokens only) and the
    decision-token mask over the same positions."""
    d = _array(decision).astype(bool)
    flipped = margins.flipped
    n, k = int(flipped.size), int(flipped.sum())
    nd, kd = int(d.sum()), int((flipped & d).sum())
    kinds = Counter(fd.alternative.kind for fd in flipped_decisions)
    winners = Counter(fd.arm_token for fd in flipped_decisions)
    return ArmMargins(
        arm=arm,
        agent_tokens=n,
        flips=k,
        flip_rate=k / n if n else None,
        flip_by_margin=flip_rate_by_margin(margins.ref_margin, flipped, edges),
        decision_tokens=nd,
        decision_flips=kd,
        decision_flip_rate=kd / nd if nd else None,
        decision_flip_by_margin=flip_rate_by_margin(margins.ref_margin[d], flipped[d], edges),
        flipped_margin_max=float(margins.ref_margin[flipped].max()) if k else None,
        flipped_decisions=flipped_decisions,
        alternative_kinds=dict(sorted(kinds.items())),
        winning_alternatives=dict(winners.most_common()),
    )


def concat(parts: Sequence[TokenMargins]) -> TokenMargins:
    """Join per-episode arrays."""
    if not parts:
        empty_f, empty_i = np.zeros(0), np.zeros(0, dtype=np.int64)
        return TokenMargins(empty_f, empty_i, empty_i, empty_i, empty_f)
    return TokenMargins(
        *(
            np.concatenate([getattr(p, f) for p in parts])
            for f in ("ref_margin", "ref_top1", "ref_top2", "arm_top1", "arm_gap")
        )
    )
