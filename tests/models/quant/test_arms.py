"""Every arm changes exactly the decoder's Linear weights, by its format's expected amount."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from flatscore.models.quant.arms import ARMS, apply_arm, quantizable_linears
from tiny_llama_model import sequences, tiny_llama

EXPECTED = {  # relative Frobenius error on Gaussian-initialised weights
    "bf16": (5e-4, 3e-3),
    "fp8": (0.01, 0.05),
    "fp8-w8a8": (0.01, 0.05),  # the same weights as fp8; activations are quantized at run time
    "int8": (0.002, 0.015),
    "int4": (0.06, 0.14),
    "int4-awq": (0.06, 0.16),
    "int4-g32": (0.04, 0.1),
    "int3": (0.12, 0.22),  # groups of 32
    "int2": (0.3, 0.5),
}


def test_linears_exclude_the_tied_head() -> None:
    model = tiny_llama()
    names = quantizable_linears(model)
    assert "lm_head" not in names and len(names) == 2 * 7
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()


def test_ref_changes_nothing() -> None:
    model = tiny_llama()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    assert apply_arm(model, "ref").relative_error == 0.0
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


@pytest.mark.parametrize("arm", [a for a in ARMS.names() if a != "ref"])
def test_arm_error_is_in_the_expected_range_and_only_linears_change(arm: str) -> None:
    model = tiny_llama()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    result = apply_arm(model, arm, sequences())
    low, high = EXPECTED[arm]
    assert low < result.relative_error < high, result.relative_error
    linear_weights = {f"{n}.weight" for n in quantizable_linears(model)}
    for key, value in model.state_dict().items():
        if key in linear_weights:
            assert not torch.equal(before[key], value), key
        else:
            assert torch.equal(before[key], value), key  # embeddings/head/norms untouched
    assert set(result.per_layer) == set(quantizable_linears(model))


def test_errors_order_by_precision() -> None:
    errors = {a: apply_arm(tiny_llama(), a, sequences()).relative_error for a in ARMS.names()}
    assert errors["ref"] < errors["bf16"] < errors["int8"] < errors["fp8"] < errors["int4"]
    assert errors["int4-g32"] < errors["int4"] < errors["int3"] < errors["int2"]
    assert errors["int4"] <= errors["int4-awq"]  # AWQ trades weight error for output error


def test_awq_needs_calibration_and_unknown_arms_are_refused() -> None:
    with pytest.raises(ValueError, match="calibration"):
        apply_arm(tiny_llama(), "int4-awq")
    with pytest.raises(ValueError, match="unknown arm"):
        apply_arm(tiny_llama(), "int5")


def test_awq_scales_are_cached_and_reused_exactly(tmp_path: Path) -> None:
    first = tiny_llama()
    r1 = apply_arm(first, "int4-awq", sequences(), awq_cache=tmp_path)
    (cached,) = list(tmp_path.iterdir())
    stamp = cached.stat().st_mtime_ns
    second = tiny_llama()
    r2 = apply_arm(second, "int4-awq", sequences(), awq_cache=tmp_path)
    assert cached.stat().st_mtime_ns == stamp and r2.alphas == r1.alphas
    for (k, a), b in zip(first.state_dict().items(), second.state_dict().values(), strict=True):
        assert torch.equal(a, b), k
    # other calibration data, or other weights, is another entry
    apply_arm(tiny_llama(), "int4-awq", sequences(seed=9), awq_cache=tmp_path)
    apply_arm(tiny_llama(seed=5), "int4-awq", sequences(), awq_cache=tmp_path)
    assert len(list(tmp_path.iterdir())) == 3


def test_w8a8_has_fp8_weights_and_quantizes_each_linears_input_per_token() -> None:
    from flatscore.models.quant.floats import fp8_e4m3_per_token

    weight_only, w8a8 = tiny_llama(), tiny_llama()
    apply_arm(weight_only, "fp8")
    apply_arm(w8a8, "fp8-w8a8")
    for (k, a), b in zip(weight_only.state_dict().items(), w8a8.state_dict().values(), strict=True):
        assert torch.equal(a, b), k  # the same fp8 weights
    q_proj = w8a8.model.layers[0].self_attn.q_proj
    x = torch.randn(5, 192, generator=torch.Generator().manual_seed(3))
    expected = torch.nn.functional.linear(fp8_e4m3_per_token(x), q_proj.weight)
    assert torch.equal(q_proj(x), expected)
    assert not torch.equal(q_proj(x), torch.nn.functional.linear(x, q_proj.weight))
    ids = torch.tensor([sequences(1)[0]])
    ref_logits = tiny_llama()(ids).logits
    a, b = weight_only(ids).logits, w8a8(ids).logits
    assert not torch.equal(a, b)  # the activations' rounding shows in the output
    # ... but stays small: e4m3 keeps 3 mantissa bits, the same grid as the weights
    assert float((b - ref_logits).norm() / ref_logits.norm()) < 0.1


def test_w8a8_rows_do_not_depend_on_the_batch() -> None:
    model = tiny_llama()
    apply_arm(model, "fp8-w8a8")
    ids = torch.tensor(sequences(3))
    together = model(ids).logits
    for i in range(3):
        assert torch.equal(model(ids[i : i + 1]).logits[0], together[i])


def test_bf16_compute_keeps_the_w8a8_activation_quantization() -> None:
    from flatscore.models.compute import Bf16Linear, apply_compute
    from flatscore.models.quant.floats import fp8_e4m3_per_token

    model = tiny_llama()
    apply_arm(model, "fp8-w8a8")
    apply_compute(model, "bf16")
    q_proj = model.model.layers[0].self_attn.q_proj
    assert isinstance(q_proj, Bf16Linear)
    x = torch.randn(4, 192, generator=torch.Generator().manual_seed(4))
    expected = (fp8_e4m3_per_token(x).bfloat16() @ q_proj.weight.t()).float()
    assert torch.equal(q_proj(x), expected)
