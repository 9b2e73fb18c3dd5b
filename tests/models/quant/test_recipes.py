"""llm-compressor recipes as data: names, twins, the YAML stage, and the checkpoint cache key."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flatscore.models.quant.arms import ARMS
from flatscore.models.quant.recipes import (
    INT4_GROUP,
    LIBRARIES,
    PREFIX,
    RECIPES,
    checkpoint_key,
    get_recipe,
    is_recipe,
)

CALIBRATING = {"AWQModifier", "GPTQModifier", "SmoothQuantModifier"}


def test_the_fp8_dynamic_recipe_is_llmcompressors_own_example() -> None:
    assert get_recipe("llmc-w8a8-fp8").stage() == {
        "quant_stage": {
            "quant_modifiers": {
                "QuantizationModifier": {
                    "targets": ["Linear"],
                    "scheme": "FP8_DYNAMIC",
                    "ignore": ["lm_head"],
                }
            }
        }
    }


def test_awq_smooths_then_quantizes_with_the_asymmetric_scheme() -> None:
    modifiers = get_recipe("llmc-w4a16-awq").modifiers
    assert list(modifiers) == ["AWQModifier", "QuantizationModifier"]
    (group,) = modifiers["QuantizationModifier"]["config_groups"].values()
    assert group["weights"] == {
        "num_bits": 4,
        "type": "int",
        "symmetric": False,
        "strategy": "group",
        "group_size": 64,
    }


def test_the_int4_group_divides_every_smollm2_layer() -> None:
    assert 576 % INT4_GROUP == 0 and 1536 % INT4_GROUP == 0


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_every_recipe_is_named_calibrated_and_twinned_consistently(name: str) -> None:
    recipe = RECIPES[name]
    assert name.startswith(PREFIX) and is_recipe(name) and name not in ARMS
    assert recipe.calibrated == bool(CALIBRATING & set(recipe.modifiers))
    assert recipe.twin is None or recipe.twin in ARMS
    for arguments in recipe.modifiers.values():
        assert arguments.get("ignore", ["lm_head"]) == ["lm_head"]  # the tied head stays


def test_the_issue_s_four_recipes_exist() -> None:
    schemes = {r.scheme for r in RECIPES.values()}
    assert {"FP8_DYNAMIC", "W8A8", "W4A16_ASYM", "W4A16"} <= schemes
    assert {"AWQModifier", "GPTQModifier"} <= {m for r in RECIPES.values() for m in r.modifiers}


def test_an_unknown_recipe_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match="llmc-w8a8-fp8"):
        get_recipe("llmc-w3a3")
    assert not is_recipe(None) and not is_recipe("int8")


hashes = st.text("0123456789abcdef", min_size=64, max_size=64)


@given(hashes, hashes, hashes)
def test_the_cache_key_follows_the_reference_recipe_and_calibration(
    ref: str, other: str, calib: str
) -> None:
    awq, fp8 = get_recipe("llmc-w4a16-awq"), get_recipe("llmc-w8a8-fp8")
    key = checkpoint_key(ref, awq, calib)
    assert key == checkpoint_key(ref, awq, calib)
    assert key != checkpoint_key(ref, fp8, calib)
    assert (key == checkpoint_key(other, awq, calib)) == (ref == other)
    assert (key == checkpoint_key(ref, awq, other)) == (calib == other)
    # a recipe without calibration ignores the calibration tokens
    assert checkpoint_key(ref, fp8, calib) == checkpoint_key(ref, fp8, None)


def test_the_library_pins_are_part_of_the_identity() -> None:
    identity = get_recipe("llmc-w8a8-fp8").identity()
    assert identity["libraries"] == LIBRARIES and LIBRARIES["torch"] == "2.13.0"
    assert identity["calibration"] is None
    assert get_recipe("llmc-w4a16-gptq").identity()["calibration"]["samples"] > 0


def test_the_makefile_builds_the_pinned_environment() -> None:
    from pathlib import Path

    makefile = (Path(__file__).resolve().parents[3] / "Makefile").read_text()
    (line,) = [x for x in makefile.splitlines() if x.startswith("QUANT_PINS")]
    pins = dict(p.split("==") for p in line.split(":=")[1].split())
    assert pins == LIBRARIES
