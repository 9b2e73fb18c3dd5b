"""Which arm is the reference: the highest precision present, by name.

Rank (highest first): fp64 > fp32 > reference words (ref, reference, full, base, baseline,
original) > bf16 > fp16 > fp8 > int8 > int4-awq/gptq > int4 > int3 > int2 > names without
digits. The number of bits is the first number in the name (`q4_k_m` → 4, `w8a8` → 8);
at equal bits float formats rank above integer ones, bf16 above fp16, and calibrated integer
formats (awq, gptq, smoothquant) above plain round-to-nearest.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

REFERENCE_WORDS = frozenset({"ref", "reference", "full", "base", "baseline", "original", "orig"})


def precision_key(name: str) -> tuple[float, str]:
    """Sort key: larger = higher precision (ties broken by name, reversed for stability)."""
    n = name.lower()
    if n in REFERENCE_WORDS:
        return 24.0, n
    m = re.search(r"(\d+)", n)
    bits = float(m.group(1)) if m else 0.0
    bonus = 0.0
    if n.startswith("bf"):
        bonus = 0.3
    elif re.match(r"(fp|f|float|e\d)", n):
        bonus = 0.2
    elif re.search(r"(awq|gptq|smooth|calib)", n):
        bonus = 0.1
    return bits + bonus, n


def precision_order(arms: Iterable[str]) -> list[str]:
    """Arms from highest to lowest precision."""
    return sorted(set(arms), key=lambda a: (-precision_key(a)[0], a))


def choose_reference(arms: Iterable[str], named: str | None = None) -> tuple[str, str]:
    """(reference arm, why). A named reference must be present (else ValueError)."""
    order = precision_order(arms)
    if named is not None:
        if named not in order:
            raise ValueError(f"reference arm {named!r} not among the arms {order}")
        return named, "named with --reference"
    top = order[0]
    if len(order) > 1 and precision_key(order[1])[0] == precision_key(top)[0]:
        return top, (
            f"highest precision by name, tied with {order[1]!r} (alphabetical tie-break; "
            "use --reference to choose)"
        )
    return top, "highest precision present (by name)"
