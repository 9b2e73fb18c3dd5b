"""The local backend's compute setting. `fp32` (the default): everything in fp32, as loaded.
`bf16`: every linear layer in bf16 (the arm's weights rounded to bf16, activations rounded to
bf16 at each matmul's input, fp32 accumulation), fp32 everywhere else (norms, attention, the
KV cache, sampling); decode tokens attend with grouped KV heads
(`flatscore.models.batching.gqa_decode_attention`, the same math in another order).

Why: on CPUs with AMX / AVX512-BF16 a bf16 matmul is several times faster than fp32
(docs/benchmarks.md), and W16A16 with bf16 weights is what a GPU serving stack computes for
the study's BF16 reference and its weight-only arms (bf16 activations, bf16 scales). It is a
setting of the whole study, never mixed within one: every arm then sees the same extra
rounding.

**Batch invariance.** oneDNN's bf16 matmul gives every row the bits it gets alone for up to
32 rows, and other bits above (measured on this host's AMX kernels; fp32 sgemm's rule is
the opposite: ≥ 16 rows, `flatscore.models.batching`). So `Bf16Linear` runs blocks of at
most `BLOCK_ROWS` rows: a row's result does not depend on how many rows share the pass.
"""

from __future__ import annotations

import torch
from torch import nn

from flatscore.models.base import COMPUTES

BLOCK_ROWS = 32


class Bf16Linear(nn.Module):
    """A linear layer computed in bf16, blocks of `BLOCK_ROWS` rows, fp32 in and out."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.in_features = linear.in_features
        self.out_features = linear.out_features
        self.weight = nn.Parameter(linear.weight.detach().to(torch.bfloat16), requires_grad=False)
        self.bias = (
            None
            if linear.bias is None
            else nn.Parameter(linear.bias.detach().to(torch.bfloat16), requires_grad=False)
        )
        for hook in linear._forward_pre_hooks.values():  # activation quantization (W8A8)
            self.register_forward_pre_hook(hook)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features).to(torch.bfloat16)
        out = torch.cat(
            [
                nn.functional.linear(rows[i : i + BLOCK_ROWS], self.weight, self.bias)
                for i in range(0, max(rows.shape[0], 1), BLOCK_ROWS)
            ]
        )
        return out.to(x.dtype).reshape(*x.shape[:-1], self.out_features)


def use_bf16_linears(model: nn.Module) -> int:
    """Replace every `nn.Linear` of `model` (the LM head included) by a `Bf16Linear` of its
    current weights, in place; returns how many. Apply after the precision arm."""
    targets = [
        (parent, name, child)
        for parent in model.modules()
        for name, child in parent.named_children()
        if isinstance(child, nn.Linear)
    ]
    for parent, name, child in targets:
        setattr(parent, name, Bf16Linear(child))
    return len(targets)


def _as_loaded(model: nn.Module) -> None:
    """fp32: the model computes as loaded."""


def _bf16(model: nn.Module) -> None:
    from flatscore.models.batching import PACK_GQA

    use_bf16_linears(model)
    setattr(model, PACK_GQA, True)


COMPUTES.register("fp32", lambda: _as_loaded)
COMPUTES.register("bf16", lambda: _bf16)


def apply_compute(model: nn.Module, compute: str) -> None:
    """Put `model` (its precision arm applied) in `compute` (a name in `COMPUTES`; else a
    ValueError listing them); in place."""
    COMPUTES.make(COMPUTES.check(compute))(model)


def bf16_is_fast() -> bool:
    """Whether this CPU has AMX tiles: the kernels bf16 compute was measured on (speed and
    the ≤ 32-row invariance). Without them bf16 matmuls can be slower than fp32."""
    probe = getattr(torch.cpu, "_is_amx_tile_supported", None)
    return bool(probe and probe())


def auto_compute() -> str:
    """bf16 where it is fast (`bf16_is_fast`), else fp32."""
    return "bf16" if bf16_is_fast() else "fp32"
