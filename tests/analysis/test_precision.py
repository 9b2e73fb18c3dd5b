from __future__ import annotations

import pytest

from flatscore.analysis.precision import (
    ReferenceUndecided,
    choose_reference,
    precision_order,
    precision_rank,
)


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
    assert precision_order(["Q4_0", "Q4_K_S", "Q4_K_M", "Q6_K"]) == [
        "Q6_K",
        "Q4_K_M",
        "Q4_K_S",
        "Q4_0",
    ]


@pytest.mark.parametrize(
    ("name", "rank"),
    [
        ("Qwen2.5-7B-Instruct", None),  # digits that are not a format mean nothing
        ("gpt-4.1", None),
        ("claude-3-7-sonnet", None),
        ("Qwen2.5-7B-Instruct-AWQ", 4.1),
        ("Llama-3.1-8B-Instruct-GPTQ-Int4", 4.1),
        ("Meta-Llama-3-8B-Instruct.Q4_K_M.gguf", 4.02),
        ("model-w8a8", 7.9),
        ("model-FP8-dynamic", 8.2),
        ("llama-bnb-nf4", 4.0),
        ("exl2-6.5bpw", 6.5),
        ("int4+repair", 4.0),
    ],
)
def test_precision_rank_vocabulary(name: str, rank: float | None) -> None:
    assert precision_rank(name) == rank


def test_choose_reference() -> None:
    assert choose_reference(["int4", "bf16", "fp8"])[0] == "bf16"
    assert choose_reference(["int4", "bf16"], "int4") == ("int4", "named")
    with pytest.raises(ValueError):
        choose_reference(["int4"], "bf16")


def test_reference_words_and_repair_variants() -> None:
    assert choose_reference(["ref", "slips"]) == ("ref", "reference_name")
    assert choose_reference(["bf16", "bf16+repair", "int4", "int4+repair"])[0] == "bf16"
    assert choose_reference(["ref", "ref+repair"])[0] == "ref"


def test_the_unmarked_original_beats_its_quantized_release() -> None:
    """`Qwen2.5-7B-Instruct` vs `…-AWQ`: the AWQ arm is not the reference because of the
    digits in the name; the unmarked original is."""
    ref, why = choose_reference(["Qwen2.5-7B-Instruct", "Qwen2.5-7B-Instruct-AWQ"])
    assert (ref, why) == ("Qwen2.5-7B-Instruct", "unmarked")


@pytest.mark.parametrize(
    "arms",
    [
        ["claude-3-7-sonnet", "gpt-4.1"],  # two models, no format: nothing to decide on
        ["a", "b"],
        ["int4-run1", "int4-run2"],  # a tie at the top
        ["bf16", "llama"],  # an unmarked name next to a full-precision one
    ],
)
def test_undecidable_names_raise(arms: list[str]) -> None:
    with pytest.raises(ReferenceUndecided, match="cannot tell the reference"):
        choose_reference(arms)
