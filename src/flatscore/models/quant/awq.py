"""Activation-aware weight quantization (AWQ, Lin et al. 2024), simulated in fp32.

AWQ protects the input channels that carry large activations: for each group of linears
sharing an input (q/k/v, gate/up, o, down) it searches a per-input-channel scale
s = mean|x|^alpha (alpha on a grid in [0, 1)) minimising the output error of
Q(W diag(s)) diag(s)^-1 on calibration activations, then keeps that weight.

Simplifications, stated: the inverse scale is kept in fp32 inside the weight instead of
being folded into the preceding norm/linear (equal in exact arithmetic; real AWQ folds the
o_proj/down_proj scales into v_proj/up_proj, which are then quantized too); AWQ's
weight-clipping search is not done; activations come from the reference model.
alpha = 0 is plain RTN, so on the calibration data AWQ is never worse than RTN.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

Quantizer = Callable[[torch.Tensor], torch.Tensor]


@dataclass
class InputStats:
    """Per linear group: mean |x| per input channel and a sample of input rows."""

    names: list[str]
    mean_abs: torch.Tensor
    sample: torch.Tensor


@dataclass
class _Acc:
    total: torch.Tensor | None = None
    count: int = 0
    rows: list[torch.Tensor] = field(default_factory=list)
    first: torch.Tensor | None = None  # the first input, held so its identity stays unique


def collect_input_stats(
    model: torch.nn.Module,
    linears: dict[str, torch.nn.Linear],
    sequences: list[list[int]],
    max_rows: int = 256,
    seed: int = 0,
) -> list[InputStats]:
    """Run the calibration sequences through the (reference) model, recording each
    linear's inputs; linears fed the very same tensor form one group."""
    generator = torch.Generator().manual_seed(seed)
    per_seq = max(1, max_rows // max(1, len(sequences)))
    accs = {name: _Acc() for name in linears}
    hooks = []

    def hook_for(name: str) -> Callable[..., None]:
        def hook(_module: torch.nn.Module, args: tuple[torch.Tensor, ...]) -> None:
            x = args[0].detach().reshape(-1, args[0].shape[-1]).float()
            acc = accs[name]
            if acc.first is None:
                acc.first = args[0]
            s = x.abs().sum(dim=0)
            acc.total = s if acc.total is None else acc.total + s
            acc.count += x.shape[0]
            pick = torch.randperm(x.shape[0], generator=generator)[:per_seq]
            acc.rows.append(x[pick])

        return hook

    for name, linear in linears.items():
        hooks.append(linear.register_forward_pre_hook(hook_for(name)))
    try:
        with torch.inference_mode():
            for ids in sequences:
                model(input_ids=torch.tensor([ids]))
    finally:
        for h in hooks:
            h.remove()

    # Linears fed the very same tensor object (q/k/v, gate/up) share an input: one group.
    groups: dict[int, list[str]] = {}
    for name, acc in accs.items():
        if acc.count:
            groups.setdefault(id(acc.first), []).append(name)
    stats = []
    for names in groups.values():
        acc = accs[names[0]]
        assert acc.total is not None
        stats.append(
            InputStats(names=names, mean_abs=acc.total / acc.count, sample=torch.cat(acc.rows))
        )
    for acc in accs.values():
        acc.first = None
    return stats


def _scale(mean_abs: torch.Tensor, alpha: float) -> torch.Tensor:
    s = mean_abs.pow(alpha).clamp(min=1e-4)
    return s / (s.max() * s.min()).sqrt()


def scaled_quantize(weight: torch.Tensor, scale: torch.Tensor, quantize: Quantizer) -> torch.Tensor:
    """Q(W diag(s)) diag(s)^-1: the weight AWQ leaves, kept in fp32."""
    return quantize(weight * scale) / scale


def search_scale(
    weights: list[torch.Tensor],
    stats: InputStats,
    quantize: Quantizer,
    grid: int = 20,
) -> tuple[float, torch.Tensor, list[torch.Tensor]]:
    """The best alpha for one group, its per-input-channel scale, and the group's
    resulting (dequantized) weights."""
    x = stats.sample
    refs = [x @ w.T for w in weights]
    best: tuple[float, float, torch.Tensor, list[torch.Tensor]] | None = None
    for i in range(grid):
        alpha = i / grid
        s = _scale(stats.mean_abs, alpha)
        candidates = [scaled_quantize(w, s, quantize) for w in weights]
        loss = sum(
            float(((x @ c.T - r) ** 2).mean()) for c, r in zip(candidates, refs, strict=True)
        )
        if best is None or loss < best[0]:
            best = (loss, alpha, s, candidates)
    assert best is not None
    return best[1], best[2], best[3]


@dataclass
class AWQScales:
    """The outcome of the search, enough to re-apply AWQ without calibrating again."""

    scales: dict[str, torch.Tensor]
    alphas: dict[str, float]


def awq_search(
    model: torch.nn.Module,
    linears: dict[str, torch.nn.Linear],
    sequences: list[list[int]],
    quantize: Quantizer,
    grid: int = 20,
) -> AWQScales:
    """Calibrate: the per-input-channel scale (and alpha) of every linear."""
    stats = collect_input_stats(model, linears, sequences)
    out = AWQScales({}, {})
    with torch.no_grad():
        for group in stats:
            weights = [linears[n].weight.data for n in group.names]
            alpha, scale, _ = search_scale(weights, group, quantize, grid)
            for name in group.names:
                out.scales[name], out.alphas[name] = scale, alpha
    return out


def apply_scales(
    linears: dict[str, torch.nn.Linear], found: AWQScales, quantize: Quantizer
) -> None:
    with torch.no_grad():
        for name, module in linears.items():
            module.weight.data.copy_(
                scaled_quantize(module.weight.data, found.scales[name], quantize)
            )
