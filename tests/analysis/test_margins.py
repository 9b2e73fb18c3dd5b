"""Margins and flips on a tiny hand-made logit fixture (every number computed by hand), and
the alternative-name classification."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from flatscore.analysis.margins import (
    FlippedDecision,
    arm_against,
    classify_alternative,
    concat,
    flip_rate_by_margin,
    margin_distribution,
    reference_top2,
    summarize_arm,
    token_margins,
)

# 5 positions × vocabulary 4 (values exact in binary floating point)
REF = np.array(
    [
        [3.0, 1.0, 0.5, 0.0],  # top1 0, top2 1, margin 2.0
        [0.0, 1.0, 0.875, -1.0],  # top1 1, top2 2, margin 0.125
        [0.0, 0.0, 0.5, 0.5],  # tie: top1 2, top2 3, margin 0
        [4.0, 0.0, 0.0, 0.0],  # top1 0, top2 1, margin 4.0
        [0.25, 0.0, 1.0, 0.5],  # top1 2, top2 3, margin 0.5
    ]
)
ARM = np.array(
    [
        [2.0, 2.5, 0.0, 0.0],  # top1 1: flip, gap 2.5 − 2.0 = 0.5
        [0.0, 0.75, 1.0, 0.0],  # top1 2: flip, gap 1.0 − 0.75 = 0.25
        [0.0, 0.0, 0.5, 0.5],  # same
        [4.0, 0.0, 0.0, 0.0],  # same
        [0.25, 0.0, 1.0, 0.5],  # same
    ]
)
DECISION = np.array([False, True, True, False, False])


def test_margins_and_flips_by_hand() -> None:
    m = token_margins(REF, ARM)
    assert m.ref_margin.tolist() == [2.0, 0.125, 0.0, 4.0, 0.5]
    assert m.ref_top1.tolist() == [0, 1, 2, 0, 2]
    assert m.ref_top2.tolist() == [1, 2, 3, 1, 3]
    assert m.arm_top1.tolist() == [1, 2, 2, 0, 2]
    assert m.flipped.tolist() == [True, True, False, False, False]
    assert m.arm_gap.tolist() == [0.5, 0.25, 0.0, 0.0, 0.0]
    # torch tensors give the same, and arm_against on a stored reference too
    t = token_margins(torch.tensor(REF, dtype=torch.float32), torch.tensor(ARM))
    assert t.flipped.tolist() == m.flipped.tolist()
    assert arm_against(reference_top2(REF), ARM).arm_gap.tolist() == m.arm_gap.tolist()
    with pytest.raises(ValueError, match="shapes differ"):
        token_margins(REF, ARM[:3])


def test_flip_rate_by_margin_by_hand() -> None:
    m = token_margins(REF, ARM)
    bins = flip_rate_by_margin(m.ref_margin, m.flipped, [0.0, 0.1, 0.25, 1.0, 3.0, float("inf")])
    assert [(b.lo, b.hi, b.tokens, b.flips) for b in bins] == [
        (0.0, 0.1, 1, 0),  # margin 0
        (0.1, 0.25, 1, 1),  # margin 0.125, flipped
        (0.25, 1.0, 1, 0),  # margin 0.5
        (1.0, 3.0, 1, 1),  # margin 2.0, flipped
        (3.0, None, 1, 0),  # margin 4.0
    ]
    assert [b.flip_rate for b in bins] == [0.0, 1.0, 0.0, 1.0, 0.0]
    empty = flip_rate_by_margin([], [], [0.0, 1.0])
    assert empty[0].tokens == 0 and empty[0].flip_rate is None


def test_summary_and_distribution_by_hand() -> None:
    m = token_margins(REF, ARM)
    fd = FlippedDecision(
        episode_id="e",
        message_index=3,
        reference_name="find_user_by_email",
        name_offset=0,
        ref_token="find",
        arm_token="lookup",
        ref_margin=0.125,
        arm_gap=0.25,
        alternative=classify_alternative("lookup", ["find_user_by_email"], [], ["lookup_user"]),
    )
    s = summarize_arm("int4", m, DECISION, [fd])
    assert (s.agent_tokens, s.flips, s.flip_rate) == (5, 2, 0.4)
    assert (s.decision_tokens, s.decision_flips, s.decision_flip_rate) == (2, 1, 0.5)
    assert s.flipped_margin_max == 2.0
    assert s.alternative_kinds == {"invented": 1}
    assert s.winning_alternatives == {"lookup": 1}
    assert sum(b.tokens for b in s.decision_flip_by_margin) == 2
    d = margin_distribution(m.ref_margin[DECISION])
    assert (d.count, d.mean, d.median, d.below_0_5) == (2, 0.0625, 0.0625, 1.0)
    assert sum(d.histogram) == 2
    assert margin_distribution([]).count == 0
    both = concat([m, m])
    assert both.flipped.sum() == 4 and concat([]).ref_margin.size == 0


def test_classify_alternative() -> None:
    agent, user = ["find_user_by_email", "get_order"], ["set_airplane_mode"]
    assert classify_alternative(' "find', agent, user).kind == "agent_tool"
    assert classify_alternative("find", agent, user).names == ["find_user_by_email"]
    assert classify_alternative("set_air", agent, user).kind == "user_tool"
    alt = classify_alternative("lookup", agent, user, hallucinated=["lookup_user", "get_x"])
    assert (alt.kind, alt.hallucinated) == ("invented", ["lookup_user"])
    assert classify_alternative(' "', agent, user).kind == "unresolved"
    # a closed name must match exactly
    assert classify_alternative('get_order",', agent, user).kind == "agent_tool"
    assert classify_alternative('get_ord",', agent, user).kind == "invented"


@settings(max_examples=50, deadline=None)
@given(arrays(np.float64, (6, 5), elements=st.floats(-4, 4, allow_nan=False)))
def test_invariants(logits: np.ndarray) -> None:
    same = token_margins(logits, logits)
    assert not same.flipped.any() and (same.ref_margin >= 0).all()
    assert (same.arm_gap == 0).all()
    noisy = token_margins(logits, logits + np.linspace(0, 1, 5))
    assert (noisy.arm_gap >= 0).all()
    bins = flip_rate_by_margin(noisy.ref_margin, noisy.flipped)
    assert sum(b.tokens for b in bins) == 6
    assert sum(b.flips for b in bins) == int(noisy.flipped.sum())
