"""An arm's weight footprint, known answers on single Linear layers (scales and offsets at
16 bits each: flatscore.models.footprint)."""

from __future__ import annotations

import pytest
import torch

from flatscore.models.footprint import FormatBits, format_bits, weight_footprint


def _linear(inputs: int, outputs: int) -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(inputs, outputs, bias=False))


@pytest.mark.parametrize(
    ("arm", "expected_bytes"),
    [
        ("ref", 4 * 256 * 4),  # fp32 as loaded
        ("bf16", 2 * 256 * 4),  # 16 bits, no scale
        ("fp8", 256 * 4 + 4 * 2),  # 8 bits + one fp16 scale per output row
        ("int8", 256 * 4 + 4 * 2),
        ("int4", (4 * 256 * 4 + 4 * 2 * 2 * 16) // 8),  # 2 groups of 128: scale + offset
        ("int4-g32", (4 * 256 * 4 + 4 * 8 * 2 * 16) // 8),  # 8 groups of 32
    ],
)
def test_format_bytes_of_one_linear(arm: str, expected_bytes: int) -> None:
    f = weight_footprint(_linear(256, 4), arm)
    assert f.parameters == 1024
    assert f.weight_bytes == expected_bytes
    assert f.resident_weight_bytes == 4096  # fake-quantized: still fp32 in memory
    assert f.bits_per_parameter == pytest.approx(8 * expected_bytes / 1024)


def test_a_ragged_last_group_has_its_own_scale_and_offset() -> None:
    # 80 inputs in groups of 32: 32 + 32 + 16, three (scale, offset) pairs per row
    f = weight_footprint(_linear(80, 2), "int4-g32")
    assert f.weight_bytes == (2 * 80 * 4 + 2 * 3 * 2 * 16) // 8 == 104


def test_parameters_outside_the_linears_stay_as_loaded() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(128, 2, bias=True))  # the bias: fp32
    f = weight_footprint(model, "int4")
    assert f.weight_bytes == (2 * 128 * 4 + 2 * 1 * 2 * 16) // 8 + 2 * 4


def test_every_registered_arm_has_a_format() -> None:
    from flatscore.models.quant.arms import ARMS

    assert format_bits("ref") is None
    for name in ARMS.names():
        if name != "ref":
            assert isinstance(format_bits(name), FormatBits), name
    assert format_bits("int4-awq") == FormatBits(4, 128, True)
    assert format_bits("int2") == FormatBits(2, 32, True)
