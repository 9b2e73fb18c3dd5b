"""AWQ: groups share an input, and the searched scales never lose to plain RTN."""

from __future__ import annotations

from functools import partial

import torch

from flatscore.models.quant.arms import quantizable_linears
from flatscore.models.quant.awq import apply_scales, awq_search, collect_input_stats, search_scale
from flatscore.models.quant.integer import rtn_groupwise_asymmetric
from tiny_llama_model import sequences, tiny_llama

Q4 = partial(rtn_groupwise_asymmetric, bits=4, group_size=128)


def test_linears_fed_the_same_input_form_one_group() -> None:
    model = tiny_llama()
    stats = collect_input_stats(model, quantizable_linears(model), sequences())
    groups = sorted(sorted(n.split(".")[-1] for n in s.names) for s in stats)
    assert groups.count(["k_proj", "q_proj", "v_proj"]) == 2
    assert groups.count(["gate_proj", "up_proj"]) == 2
    assert groups.count(["o_proj"]) == 2 and groups.count(["down_proj"]) == 2
    for s in stats:
        assert s.mean_abs.shape == (s.sample.shape[1],) and bool((s.mean_abs > 0).all())


def _output_error(x: torch.Tensor, w: torch.Tensor, q: torch.Tensor) -> float:
    return float(((x @ w.T - x @ q.T) ** 2).mean())


def test_search_beats_rtn_when_some_input_channels_are_salient() -> None:
    """Outlier input channels (as in real LLM activations) are what AWQ protects."""
    g = torch.Generator().manual_seed(0)
    from flatscore.models.quant.awq import InputStats

    x = torch.randn(256, 192, generator=g)
    x[:, :4] *= 30  # salient channels
    w = torch.randn(64, 192, generator=g)
    stats = InputStats(names=["l"], mean_abs=x.abs().mean(dim=0), sample=x)
    alpha, _scale, (q,) = search_scale([w], stats, Q4)
    rtn = Q4(w)
    assert alpha > 0
    assert _output_error(x, w, q) < 0.7 * _output_error(x, w, rtn)


def test_awq_on_a_model_never_loses_to_rtn_on_calibration_data() -> None:
    """The search minimises a group's summed output error, and alpha = 0 is plain RTN."""
    model = tiny_llama()
    linears = quantizable_linears(model)
    original = {n: m.weight.detach().clone() for n, m in linears.items()}
    groups = collect_input_stats(model, linears, sequences())
    found = awq_search(model, linears, sequences(), Q4)
    apply_scales(linears, found, Q4)  # as quant.arms applies an AWQ arm
    alphas = found.alphas
    assert set(alphas) == set(linears)
    for group in groups:
        x = group.sample
        awq_err = sum(_output_error(x, original[n], linears[n].weight) for n in group.names)
        rtn_err = sum(_output_error(x, original[n], Q4(original[n])) for n in group.names)
        assert awq_err <= rtn_err * (1 + 1e-4), group.names
        assert len({alphas[n] for n in group.names}) == 1  # one scale per shared input
