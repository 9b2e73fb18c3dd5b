"""The bf16 compute setting: row invariance of the blocked bf16 linear and the grouped decode
attention's math (batched = unbatched on the real model in bf16: tests/models/test_batching.py)."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from flatscore.models.batching import PACK_GQA, gqa_decode_attention
from flatscore.models.compute import (
    BLOCK_ROWS,
    Bf16Linear,
    Fp16Linear,
    Fp16MLP,
    apply_compute,
    bf16_is_fast,
    fuse_fp16_mlps,
    use_bf16_linears,
    use_fp16_linears,
)


@pytest.mark.skipif(
    not bf16_is_fast(), reason="bf16 row invariance was measured on AMX kernels; no AMX here"
)
@pytest.mark.parametrize(("k", "n"), [(576, 1536), (1536, 576), (576, 49152)])
def test_a_rows_bf16_result_does_not_depend_on_the_other_rows(k: int, n: int) -> None:
    """The model's shapes (MLP in/out, LM head): every row of a 100-row pass equals the row
    computed alone, and equals it inside a pass of any other size."""
    torch.manual_seed(0)
    layer = Bf16Linear(nn.Linear(k, n, bias=False))
    x = torch.randn(100, k)
    with torch.inference_mode():
        together = layer(x)
        alone = torch.cat([layer(x[i : i + 1]) for i in range(len(x))])
        assert torch.equal(together, alone)
        for m in (1, 16, BLOCK_ROWS, BLOCK_ROWS + 1, 40, 64):
            assert torch.equal(layer(x[:m]), alone[:m]), m


def test_bf16_linear_is_the_linear_in_bf16() -> None:
    torch.manual_seed(1)
    linear = nn.Linear(64, 32)
    layer = Bf16Linear(linear)
    x = torch.randn(3, 5, 64)  # leading dimensions kept
    out = layer(x)
    assert out.shape == (3, 5, 32) and out.dtype == torch.float32
    exact = nn.functional.linear(
        x.to(torch.bfloat16).float(), linear.weight.to(torch.bfloat16).float(),
        linear.bias.to(torch.bfloat16).float(),
    )  # fmt: skip
    assert torch.allclose(out, exact, rtol=1e-2, atol=1e-2)
    assert not torch.equal(out, linear(x))  # it did round


def test_use_bf16_linears_replaces_every_linear() -> None:
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Sequential(nn.Linear(8, 2)))
    assert use_bf16_linears(model) == 2
    assert not any(type(m) is nn.Linear for m in model.modules())
    assert sum(isinstance(m, Bf16Linear) for m in model.modules()) == 2


def test_apply_compute_fp32_changes_nothing_and_refuses_unknown() -> None:
    model = nn.Sequential(nn.Linear(4, 4))
    apply_compute(model, "fp32")
    assert type(model[0]) is nn.Linear and not getattr(model, PACK_GQA, False)
    with pytest.raises(ValueError, match="unknown compute"):
        apply_compute(model, "fp8")  # type: ignore[arg-type]


def test_fp16_linear_one_row_in_fp16_more_rows_in_fp32_on_fp16_weights() -> None:
    """One row: torch's fp16 linear on the row rounded to fp16, result rounded to fp16 (fp32
    accumulation: as close to the exact product as rounding the exact result to fp16).
    More rows: fp32 on the fp16-rounded weights, so a padded pass is fp32's sgemm."""
    torch.manual_seed(2)
    linear = nn.Linear(576, 1536)
    layer = Fp16Linear(linear)
    w16, b16 = linear.weight.half(), linear.bias.half()
    x = torch.randn(3, 576)
    with torch.inference_mode():
        one = layer(x[:1])
        assert one.dtype == torch.float32 and one.shape == (1, 1536)
        assert torch.equal(one, nn.functional.linear(x[:1].half(), w16, b16).float())
        exact = x[:1].half().double() @ w16.double().T + b16.double()
        assert (one.double() - exact).abs().max() <= (exact.half().double() - exact).abs().max()
        many = layer(x[None])  # leading dimensions kept
        assert many.shape == (1, 3, 1536)
        assert torch.equal(many[0], nn.functional.linear(x, w16.float(), b16.float()))
        assert not torch.equal(many[0], linear(x))  # the weights were rounded


def test_fp16_compute_replaces_every_linear_and_groups_decode_attention() -> None:
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Sequential(nn.Linear(8, 2)))
    assert use_fp16_linears(model) == 2
    assert sum(isinstance(m, Fp16Linear) for m in model.modules()) == 2
    other = nn.Sequential(nn.Linear(4, 4))
    apply_compute(other, "fp16")
    assert isinstance(other[0], Fp16Linear) and getattr(other, PACK_GQA)
    assert other[0].weight.dtype == torch.float16


def test_the_fused_fp16_mlp_is_the_mlp_of_fp16_linears_bit_for_bit() -> None:
    """SmolLM2's MLP shape: gate and up as one fp16 GEMV give the same bits as two, for one
    row (the lone decode step) and for more (fp32 on the fp16 weights)."""
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaMLP

    torch.manual_seed(3)
    config = LlamaConfig(hidden_size=576, intermediate_size=1536, hidden_act="silu")
    reference = nn.Sequential(LlamaMLP(config))
    use_fp16_linears(reference)
    fused = copy.deepcopy(reference)
    assert fuse_fp16_mlps(fused) == 1 and isinstance(fused[0], Fp16MLP)
    with torch.inference_mode():
        for rows in (1, 2, 17):
            x = torch.randn(1, rows, 576)
            assert torch.equal(fused(x), reference(x)), rows


@pytest.mark.parametrize("keys", [1, 37, 700])
def test_grouped_decode_attention_is_gqa_attention(keys: int) -> None:
    """9 query heads on 3 KV heads (SmolLM2-135M): the same numbers as SDPA with the KV
    heads repeated, to float rounding; output laid out as transformers' SDPA returns it."""
    torch.manual_seed(keys)
    q = torch.randn(1, 9, 1, 64)
    k, v = torch.randn(1, 3, keys, 64), torch.randn(1, 3, keys, 64)
    out = gqa_decode_attention(q, k, v, 0.125)
    expected = nn.functional.scaled_dot_product_attention(
        q, k.repeat_interleave(3, dim=1), v.repeat_interleave(3, dim=1), scale=0.125
    ).transpose(1, 2)
    assert out.shape == (1, 1, 9, 64)
    assert torch.allclose(out, expected, atol=1e-6)
