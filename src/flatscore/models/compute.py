"""The local backend's compute setting. `fp32` (the default): everything in fp32, as loaded.
`bf16`: every linear layer in bf16 (the arm's weights rounded to bf16, activations rounded to
bf16 at each matmul's input, fp32 accumulation), fp32 everywhere else (norms, attention, the
KV cache, sampling); decode tokens attend with grouped KV heads
(`flatscore.models.batching.gqa_decode_attention`, the same math in another order).
`fp16`: one sequence alone (`serve --no-batch-invariant`, one episode at a time). Every
linear layer holds its weights in fp16 (the arm's weights rounded to fp16: exact for an F16
GGUF); a pass of one row (a lone sequence's decode step) multiplies in fp16 (activations
and result rounded to fp16, fp32 accumulation), passes of more rows multiply in fp32 on the
fp16 weights; decode tokens attend with grouped KV heads, as in `bf16`.

Why: on CPUs with AMX / AVX512-BF16 a bf16 matmul is several times faster than fp32
(docs/benchmarks.md), and W16A16 with bf16 weights is what a GPU serving stack computes for
the study's BF16 reference and its weight-only arms (bf16 activations, bf16 scales). It is a
setting of the whole study, never mixed within one: every arm then sees the same extra
rounding.

**Batch invariance.** oneDNN's bf16 matmul gives every row the bits it gets alone for up to
32 rows, and other bits above (measured on this host's AMX kernels; fp32 sgemm's rule is
the opposite: ≥ 16 rows, `flatscore.models.batching`). So `Bf16Linear` runs blocks of at
most `BLOCK_ROWS` rows: a row's result does not depend on how many rows share the pass.

**Why fp16 for one row.** A lone sequence's decode step reads every weight once per token:
memory- and kernel-bound, not arithmetic-bound. torch's own fp16 GEMV (AVX512, fp32
accumulation) ran the 135M model's linears 3.5x faster than fp32's one-row sgemm on this
AMD EPYC (no AMX: bf16 was 1.2x); but its fp16 GEMM is slower than fp32's from a few rows
on, so passes of several rows (prefill chunks, batches) upcast the weights and run fp32's
sgemm. Padded to 16 rows (`batch_invariant`), every pass takes the fp32 path: batched =
unbatched, as in fp32, only slower (each pass converts the weights) — fp16 pays off for
one stream only (docs/benchmarks.md#one-stream-the-fp16-setting).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from flatscore.models.base import COMPUTES

BLOCK_ROWS = 32


class _CastLinear(nn.Module):
    """A linear layer's weights (and bias) rounded to `dtype`, frozen; its forward pre-hooks
    (activation quantization, W8A8) kept. Subclasses compute with them."""

    dtype: torch.dtype

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.in_features = linear.in_features
        self.out_features = linear.out_features
        self.weight = nn.Parameter(linear.weight.detach().to(self.dtype), requires_grad=False)
        self.bias = (
            None
            if linear.bias is None
            else nn.Parameter(linear.bias.detach().to(self.dtype), requires_grad=False)
        )
        for hook in linear._forward_pre_hooks.values():
            self.register_forward_pre_hook(hook)


class Bf16Linear(_CastLinear):
    """A linear layer computed in bf16, blocks of `BLOCK_ROWS` rows, fp32 in and out."""

    dtype = torch.bfloat16

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features).to(torch.bfloat16)
        out = torch.cat(
            [
                nn.functional.linear(rows[i : i + BLOCK_ROWS], self.weight, self.bias)
                for i in range(0, max(rows.shape[0], 1), BLOCK_ROWS)
            ]
        )
        return out.to(x.dtype).reshape(*x.shape[:-1], self.out_features)


class Fp16Linear(_CastLinear):
    """A linear layer with fp16 weights: one row computes in fp16 (torch's fp16 GEMV), more
    rows in fp32 on the same weights (module docstring: why). fp32 in and out."""

    dtype = torch.float16

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features)
        if rows.shape[0] == 1:
            out = nn.functional.linear(rows.to(torch.float16), self.weight, self.bias)
        else:
            bias = None if self.bias is None else self.bias.float()
            out = nn.functional.linear(rows, self.weight.float(), bias)
        return out.to(x.dtype).reshape(*x.shape[:-1], self.out_features)


class Fp16MLP(nn.Module):
    """Llama's gated MLP, `down(act(gate(x)) * up(x))`, in the fp16 setting with the gate and
    up weights stacked into one matrix: a one-row pass reads both in one fp16 GEMV (the same
    dot products, bit for bit; one call and its conversions fewer per layer). More rows: the
    two fp32 products of `Fp16Linear`."""

    def __init__(self, gate: Fp16Linear, up: Fp16Linear, down: nn.Module, act: nn.Module) -> None:
        super().__init__()
        self.in_features = gate.in_features
        self.inner = gate.out_features
        self.gate_up = nn.Parameter(torch.cat([gate.weight, up.weight]), requires_grad=False)
        self.down_proj = down
        self.act_fn = act

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features)
        if rows.shape[0] == 1:
            both = nn.functional.linear(rows.to(torch.float16), self.gate_up).to(x.dtype)
            gate, up = both.split(self.inner, dim=-1)
        else:
            weight = self.gate_up.float()
            gate = nn.functional.linear(rows, weight[: self.inner])
            up = nn.functional.linear(rows, weight[self.inner :])
        hidden = (self.act_fn(gate) * up).reshape(*x.shape[:-1], self.inner)
        return self.down_proj(hidden)


def fuse_fp16_mlps(model: nn.Module) -> int:
    """Replace each `LlamaMLP` whose gate and up are plain `Fp16Linear`s (no bias, no
    activation-quantization hook) by an `Fp16MLP`, in place; returns how many."""

    def plain(layer: Any) -> bool:
        return isinstance(layer, Fp16Linear) and layer.bias is None and not layer._forward_pre_hooks

    targets = [
        (parent, name, child)
        for parent in model.modules()
        for name, child in parent.named_children()
        if type(child).__name__ == "LlamaMLP" and plain(child.gate_proj) and plain(child.up_proj)
    ]
    for parent, name, child in targets:
        mlp: Any = child
        setattr(parent, name, Fp16MLP(mlp.gate_proj, mlp.up_proj, mlp.down_proj, mlp.act_fn))
    return len(targets)


def _replace_linears(model: nn.Module, make: type[nn.Module]) -> int:
    targets = [
        (parent, name, child)
        for parent in model.modules()
        for name, child in parent.named_children()
        if isinstance(child, nn.Linear)
    ]
    for parent, name, child in targets:
        setattr(parent, name, make(child))
    return len(targets)


def use_fp16_linears(model: nn.Module) -> int:
    """Replace every `nn.Linear` of `model` (the LM head included) by an `Fp16Linear` of
    its current weights, in place; returns how many. Apply after the precision arm."""
    return _replace_linears(model, Fp16Linear)


def use_bf16_linears(model: nn.Module) -> int:
    """Replace every `nn.Linear` of `model` (the LM head included) by a `Bf16Linear` of its
    current weights, in place; returns how many. Apply after the precision arm."""
    return _replace_linears(model, Bf16Linear)


def _as_loaded(model: nn.Module) -> None:
    """fp32: the model computes as loaded."""


def _bf16(model: nn.Module) -> None:
    from flatscore.models.batching import PACK_GQA

    use_bf16_linears(model)
    setattr(model, PACK_GQA, True)


def _fp16(model: nn.Module) -> None:
    """fp16 weights; a lone row decodes with torch's fp16 kernel (docs/benchmarks.md)."""
    from flatscore.models.batching import PACK_GQA

    use_fp16_linears(model)
    fuse_fp16_mlps(model)
    setattr(model, PACK_GQA, True)


COMPUTES.register("fp32", lambda: _as_loaded)
COMPUTES.register("bf16", lambda: _bf16)
COMPUTES.register("fp16", lambda: _fp16)


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
