"""Which arm is the reference: decided from a known vocabulary of numeric formats, or not at
all (docs/analysis.md, "Cells, arms, reference").

An arm name is searched for format words (whole tokens, case-insensitive): fp64 > fp32 >
reference words (ref, reference, full, base, baseline, original) > bf16 > fp16 > fp8 > int8 /
Q8_0 > w8a8 > Q6_K > Q5_K_M… > int4-awq / gptq > Q4_K_M > Q4_K_S > int4 / Q4_0 / nf4 / fp4 >
int3 / Q3_K… > int2 / Q2_K, plus `<n>bpw`. Digits that are not a format (`Qwen2.5-7B`,
`gpt-4.1`) mean nothing. A name with no format word is *unmarked*: when exactly one arm is
unmarked and every other arm names a quantized format (< 16 bits), the unmarked one is the
original checkpoint (the Hugging Face convention: `Qwen2.5-7B-Instruct` vs
`Qwen2.5-7B-Instruct-AWQ`); an arm called by a reference word (`ref`) is the reference next
to unmarked variants; `int4+repair` is `int4` with a treatment, so `int4` wins the tie.
Anything else — two unmarked names, a tie at the top — is
undecidable: `choose_reference` raises `ReferenceUndecided` and the CLI asks for
`--reference`. Guessing would turn a 37-point drop into "no damage detected".
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal

REFERENCE_RANK = 24.0
REPAIR_SUFFIX = "+repair"

_FORMATS: tuple[tuple[str, float], ...] = (
    (r"fp64|f64|float64", 64.0),
    (r"fp32|f32|float32", 32.0),
    (r"ref|reference|full|base|baseline|original|orig", REFERENCE_RANK),
    (r"bf16|bfloat16", 16.3),
    (r"fp16|f16|float16|half", 16.2),
    (r"fp8|f8|float8|e4m3|e5m2|fp8[-_]?dynamic", 8.2),
    (r"int8|i8|q8|q8[-_]0|w8a16|8[-_]?bit", 8.0),
    (r"w8a8|smoothquant", 7.9),
    (r"q6[-_]k|int6", 6.0),
    (r"q5[-_]k[-_]m", 5.02),
    (r"q5[-_]k[-_]s", 5.01),
    (r"q5[-_][01]|q5[-_]k|int5", 5.0),
    (r"awq|gptq", 4.1),
    (r"q4[-_]k[-_]m", 4.02),
    (r"q4[-_]k[-_]s|iq4[-_](xs|nl)", 4.01),
    (r"int4|i4|q4|q4[-_][01]|q4[-_]k|w4a16|nf4|fp4|mxfp4|nvfp4|4[-_]?bit", 4.0),
    (r"int3|q3[-_]k[-_][lms]|q3[-_]k|iq3[-_](xxs|xs|s|m)", 3.0),
    (r"int2|q2[-_]k|iq2[-_](xxs|xs|s|m)", 2.0),
    (r"iq1[-_][sm]|int1", 1.0),
)
_PATTERNS = tuple((re.compile(rf"(?<![a-z0-9])(?:{p})(?![a-z0-9])"), rank) for p, rank in _FORMATS)
_BPW = re.compile(r"(?<![a-z0-9.])(\d+(?:\.\d+)?)[-_]?bpw(?![a-z0-9])")
_CALIBRATED = re.compile(r"(?<![a-z0-9])(awq|gptq)(?![a-z0-9])")


class ReferenceUndecided(ValueError):
    """The arm names do not say which one is the reference."""


def precision_rank(name: str) -> float | None:
    """Larger = higher precision; None when the name holds no known format word."""
    n = name.lower()
    found = [(m.start(), m.end(), rank) for pattern, rank in _PATTERNS for m in pattern.finditer(n)]
    found += [(m.start(), m.end(), float(m.group(1))) for m in _BPW.finditer(n)]
    kept: list[tuple[int, int, float]] = []  # longest matches win: `q4_k_m` is not `q4`
    for start, end, rank in sorted(found, key=lambda x: x[0] - x[1]):
        if all(end <= s or start >= e for s, e, _ in kept):
            kept.append((start, end, rank))
    ranks = [rank for _, _, rank in kept]
    if not ranks:
        return None
    rank = min(ranks)  # `int4-awq`: the weights are 4-bit whatever else the name says
    if rank == 4.0 and _CALIBRATED.search(n):
        rank = 4.1  # int4 + AWQ/GPTQ calibration ranks above plain round-to-nearest
    return rank


def precision_order(arms: Iterable[str]) -> list[str]:
    """Arms from highest to lowest precision; unmarked names last, alphabetically."""
    return sorted(set(arms), key=lambda a: (-(precision_rank(a) or -1.0), a))


ReferenceWhy = Literal["named", "only_arm", "unmarked", "reference_name", "highest"]
"""Why an arm is the reference, as data (the report words it: `report.reference_text`)."""


def choose_reference(arms: Iterable[str], named: str | None = None) -> tuple[str, ReferenceWhy]:
    """(reference arm, why). A named reference must be present (else ValueError); names that
    do not decide raise ReferenceUndecided."""
    order = precision_order(arms)
    if named is not None:
        if named not in order:
            raise ValueError(f"reference arm {named!r} not among the arms {order}")
        return named, "named"
    if len(order) == 1:
        return order[0], "only_arm"
    ranks = {a: precision_rank(a) for a in order}
    unmarked = [a for a in order if ranks[a] is None]
    top = order[0]
    tied = [a for a in order if ranks[a] is not None and ranks[a] == ranks[top]]
    plain = [a for a in tied if not a.endswith(REPAIR_SUFFIX)]
    if len(tied) > 1 and len(plain) == 1 and all(a.startswith(plain[0]) for a in tied):
        tied = plain  # `int4` and `int4+repair`: repair is a treatment on top of the arm
    if unmarked:
        quantized = all(r is not None and r < 16 for a, r in ranks.items() if a not in unmarked)
        if len(unmarked) == 1 and quantized:
            return unmarked[0], "unmarked"
        if ranks[top] == REFERENCE_RANK and len(tied) == 1:
            return top, "reference_name"
        raise ReferenceUndecided(
            f"cannot tell the reference from the arm names ({', '.join(order)}): "
            f"{', '.join(unmarked)} name(s) no known numeric format"
        )
    if len(tied) > 1:
        raise ReferenceUndecided(
            f"cannot tell the reference from the arm names: {tied[0]!r} and {tied[1]!r} name "
            "the same precision"
        )
    return tied[0], "highest"
