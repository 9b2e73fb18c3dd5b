from __future__ import annotations

import pytest

from flatscore.analysis.precision import choose_reference, precision_order


def test_precision_order() -> None:
    arms = ["int2", "int4", "int4-awq", "int8", "fp8", "fp16", "bf16", "ref", "fp32", "int3"]
    assert precision_order(arms) == [
        "fp32",
        "ref",
        "bf16",
        "fp16",
        "fp8",
        "int8",
        "int4-awq",
        "int4",
        "int3",
        "int2",
    ]
    assert precision_order(["q4_k_m", "q8_0", "f16"]) == ["f16", "q8_0", "q4_k_m"]


def test_choose_reference() -> None:
    assert choose_reference(["int4", "bf16", "fp8"]) == (
        "bf16",
        "highest precision present (by name)",
    )
    assert choose_reference(["int4", "bf16"], "int4") == ("int4", "named with --reference")
    ref, why = choose_reference(["a", "b"])
    assert ref == "a" and "tied" in why
    with pytest.raises(ValueError):
        choose_reference(["int4"], "bf16")
