"""llm-compressor recipes: the arms whose weights are a compressed-tensors checkpoint made by
llm-compressor (vLLM's quantization library), not flatscore's own fake quantization.

A recipe here is data: the llm-compressor recipe (stage → modifier → arguments, exactly as
`oneshot` reads it from YAML), whether it calibrates, and the hand-written arm it is held
against (docs/arms.md, "llm-compressor checkpoints"). Building it needs no llm-compressor;
running it does (`flatscore.models.quant.toolchain`, in the `make quant-env` environment).
Every recipe leaves the (tied) lm_head, the embeddings and the norms as loaded, like the
hand-written arms.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

PREFIX = "llmc-"
"""Every recipe's arm name starts with it: a study arm `quant: llmc-...` is a checkpoint."""

LIBRARIES = {
    "llmcompressor": "0.14.0.1",
    "compressed-tensors": "0.19.0",
    "transformers": "5.17.0",
    "torch": "2.13.0",
}
"""The quantization environment's pins (the Makefile's QUANT_PINS): part of every
checkpoint's cache key, and checked against what the environment reports."""

CALIBRATION_SAMPLES = 64
"""Train-split agent transcripts per calibrated recipe (llm-compressor's examples use 256-512
of generic text; 64 transcripts of ~500-1,500 tokens cover the agent's own format)."""
MAX_SEQUENCE_LENGTH = 2048


class Recipe(BaseModel):
    """One llm-compressor recipe, by arm name."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str
    scheme: str = Field(
        description="the compressed-tensors preset it is (FP8_DYNAMIC, W8A8…; the int4 ones "
        "at groups of INT4_GROUP)"
    )
    modifiers: dict[str, dict[str, Any]] = Field(
        description="llm-compressor modifiers in the order they run, with their arguments"
    )
    calibrated: bool = Field(description="needs calibration transcripts")
    twin: str | None = Field(None, description="the hand-written arm held against it")
    samples: int = Field(CALIBRATION_SAMPLES, ge=1, description="calibration transcripts")
    max_tokens: int = Field(
        MAX_SEQUENCE_LENGTH, ge=1, description="each transcript's last tokens kept"
    )

    def stage(self) -> dict[str, Any]:
        """The recipe as llm-compressor's YAML reads it (one stage)."""
        return {"quant_stage": {"quant_modifiers": self.modifiers}}

    def identity(self) -> dict[str, Any]:
        """What makes two checkpoints of this recipe the same: the recipe, the calibration
        settings and the library pins."""
        return {
            "recipe": self.name,
            "stage": self.stage(),
            "calibration": (
                {"samples": self.samples, "max_tokens": self.max_tokens, "window": "last"}
                if self.calibrated
                else None
            ),
            "libraries": LIBRARIES,
        }


_IGNORE = ["lm_head"]


def _quantize(scheme: str) -> dict[str, Any]:
    return {"targets": ["Linear"], "scheme": scheme, "ignore": _IGNORE}


INT4_GROUP = 64
"""The int4 recipes' group size. Not llm-compressor's preset 128: compressed-tensors refuses
a group size that does not divide every quantized layer's input width, and SmolLM2's 576 is
4.5 x 128 (flatscore's own int4 arms quantize the ragged last group on its own). 64 divides
576 and 1536."""


def _weights_only(bits: int, symmetric: bool, group_size: int | None) -> dict[str, Any]:
    """Integer weights, no activation quantization: per output channel (`group_size`
    None) or in groups. Written out because the W8A16 preset is groups of 128."""
    weights: dict[str, Any] = {"num_bits": bits, "type": "int", "symmetric": symmetric}
    weights |= (
        {"strategy": "channel"}
        if group_size is None
        else {"strategy": "group", "group_size": group_size}
    )
    return {
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights}},
        "ignore": _IGNORE,
    }


def _rounding(
    name: str, description: str, scheme: str, quantization: dict[str, Any], twin: str
) -> Recipe:
    """A recipe that only rounds (one `QuantizationModifier`, no calibration), held against
    the hand-written arm `twin`."""
    return Recipe(
        name=name,
        description=description,
        scheme=scheme,
        modifiers={"QuantizationModifier": quantization},
        calibrated=False,
        twin=twin,
    )


RECIPES: dict[str, Recipe] = {
    r.name: r
    for r in [
        _rounding(
            "llmc-w8a8-fp8",
            "FP8 dynamic: fp8 e4m3 weights, one scale per output channel; activations fp8 "
            "per token at run time (no calibration)",
            "FP8_DYNAMIC",
            _quantize("FP8_DYNAMIC"),
            twin="fp8-w8a8",
        ),
        _rounding(
            "llmc-w8a16-int8",
            "INT8 weight-only: int8 symmetric RTN weights, one scale per output channel (no "
            "calibration)",
            "W8A16",
            _weights_only(8, True, None),
            twin="int8",
        ),
        Recipe(
            name="llmc-w8a8-int8",
            description="INT8 W8A8: SmoothQuant (strength 0.8) then GPTQ int8 weights, one "
            "scale per output channel; activations int8 per token at run time",
            scheme="W8A8",
            modifiers={
                "SmoothQuantModifier": {"smoothing_strength": 0.8},
                "GPTQModifier": _quantize("W8A8"),
            },
            calibrated=True,
        ),
        Recipe(
            name="llmc-w4a16-awq",
            description="W4A16 AWQ: int4 asymmetric weights, groups of 64, AWQ scales",
            scheme="W4A16_ASYM",
            # llm-compressor 0.14: AWQ only smooths; the quantization modifier after it
            # quantizes with the scales it found. Its grid search runs each layer's
            # attention or MLP forward per grid point on every calibration token (~5 GFLOP
            # a token here at its default 20 points): 4 windows of 128 tokens and 3 points
            # (no scaling; duo scaling at alpha 0 and 1) keep it to minutes on a shared
            # 2-core CPU. A smoke-sized search: on a GPU, raise all three.
            modifiers={
                "AWQModifier": {"n_grid": 3},
                "QuantizationModifier": _weights_only(4, False, INT4_GROUP),
            },
            calibrated=True,
            twin="int4-awq",
            samples=4,
            max_tokens=128,
        ),
        _rounding(
            "llmc-w4a16-rtn",
            "W4A16 RTN: int4 asymmetric weights, groups of 64, no calibration",
            "W4A16_ASYM",
            _weights_only(4, False, INT4_GROUP),
            twin="int4",
        ),
        Recipe(
            name="llmc-w4a16-gptq",
            description="W4A16 GPTQ: int4 symmetric weights, groups of 64",
            scheme="W4A16",
            modifiers={"GPTQModifier": _weights_only(4, True, INT4_GROUP)},
            calibrated=True,
        ),
    ]
}
"""The llm-compressor recipes by arm name."""


def is_recipe(name: str | None) -> bool:
    return name is not None and name in RECIPES


def get_recipe(name: str) -> Recipe:
    """The recipe `name`; ValueError listing the known ones."""
    if name not in RECIPES:
        raise ValueError(f"unknown llm-compressor recipe {name!r} (known: {', '.join(RECIPES)})")
    return RECIPES[name]


def checkpoint_key(reference_sha256: str, recipe: Recipe, calibration_sha256: str | None) -> str:
    """The cache key of a checkpoint: the reference weights' hash, the recipe (with its
    calibration settings and the library pins) and the calibration tokens' hash."""
    blob = json.dumps(
        {
            "reference": reference_sha256,
            **recipe.identity(),
            "calibration_tokens": calibration_sha256 if recipe.calibrated else None,
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()
