"""The named precision arms and how each is applied to a model's weights.

Every arm changes only the decoder's Linear layers (attention q/k/v/o, MLP gate/up/down).
Embeddings, the (tied) lm_head and the norms stay exactly as loaded in every arm, as in
vLLM's FP8 and AWQ checkpoints, so arms differ from `ref` only in the formats they name.
Arms are weight-only except `fp8-w8a8`, which also quantizes each linear's input at run
time (a forward pre-hook: `QuantizeInput`), as served FP8 checkpoints do.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import torch

from flatscore.models.quant.awq import AWQScales, apply_scales, awq_search
from flatscore.models.quant.floats import bf16, fp8_e4m3, fp8_e4m3_per_token
from flatscore.models.quant.integer import rtn_groupwise_asymmetric, rtn_per_channel_symmetric
from flatscore.registry import Registry

Quantizer = Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Arm:
    name: str
    description: str
    quantize: Quantizer | None = None
    awq: bool = False
    activations: Quantizer | None = None  # applied to every changed linear's input


class QuantizeInput:
    """A forward pre-hook putting a linear layer's input through `quantize` (activation
    quantization at run time). `flatscore.models.compute` carries it over when it swaps the
    layer for a bf16 one."""

    def __init__(self, quantize: Quantizer) -> None:
        self.quantize = quantize

    def __call__(
        self, module: torch.nn.Module, args: tuple[torch.Tensor, ...]
    ) -> tuple[torch.Tensor, ...]:
        return (self.quantize(args[0]), *args[1:])


ARMS: Registry[Arm] = Registry("arm", cached=True)
"""The in-process precision arms by name (`ARMS.make(name)`: its `Arm`)."""


def register_arm(
    name: str,
    description: str,
    quantize: Quantizer | None = None,
    *,
    awq: bool = False,
    activations: Quantizer | None = None,
) -> None:
    """Add an arm to `ARMS` (a plug-in's format, or a test's)."""
    ARMS.register(name, partial(Arm, name, description, quantize, awq, activations))


def _groupwise(bits: int, group_size: int) -> Quantizer:
    """Asymmetric RTN at `bits` in groups of `group_size` input channels (ragged last group):
    the grid of every intN arm below int8."""
    return partial(rtn_groupwise_asymmetric, bits=bits, group_size=group_size)


register_arm("ref", "weights as loaded (the reference)")
register_arm("bf16", "bfloat16 round-trip", bf16)
register_arm("fp8", "fp8 e4m3, one scale per output channel", fp8_e4m3)
register_arm(
    "fp8-w8a8",
    "fp8 e4m3 weights (one scale per output channel) and activations (one scale per token, "
    "at run time)",
    fp8_e4m3,
    activations=fp8_e4m3_per_token,
)
register_arm(
    "int8",
    "int8 symmetric RTN, one scale per output channel",
    partial(rtn_per_channel_symmetric, bits=8),
)
register_arm("int4", "int4 asymmetric RTN, groups of 128 (ragged last group)", _groupwise(4, 128))
register_arm(
    "int4-awq",
    "int4 asymmetric, groups of 128, AWQ per-input-channel scales",
    _groupwise(4, 128),
    awq=True,
)
register_arm(
    "int4-g32", "int4 asymmetric RTN, groups of 32 (the Q4_1 grid: a control)", _groupwise(4, 32)
)
# Stress arms use groups of 32: at 128, int3 keeps only ~25% top-1 agreement with the
# reference on agent transcripts (docs/arms.md), too broken to stress anything.
register_arm("int3", "int3 asymmetric RTN, groups of 32 (stress arm)", _groupwise(3, 32))
register_arm("int2", "int2 asymmetric RTN, groups of 32 (stress arm; the floor)", _groupwise(2, 32))


@dataclass
class ArmResult:
    """What applying an arm did: relative Frobenius error over all changed weights
    (||W' - W|| / ||W||, pooled) and per layer; AWQ's chosen alpha per layer."""

    arm: str
    relative_error: float
    per_layer: dict[str, float] = field(default_factory=dict)
    alphas: dict[str, float] = field(default_factory=dict)


def quantizable_linears(model: torch.nn.Module) -> dict[str, torch.nn.Linear]:
    """The decoder's Linear layers: every nn.Linear except the output head."""
    get_head = getattr(model, "get_output_embeddings", None)
    head = get_head() if callable(get_head) else None
    return {
        name: module
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.Linear) and module is not head
    }


def _awq_cache_file(
    cache: Path, arm: str, linears: dict[str, torch.nn.Linear], calibration: list[list[int]]
) -> Path:
    """Keyed by the arm, the weights (shape + two float64 checksums per linear: cheap, and
    any merged adapter changes them) and the calibration tokens."""
    h = hashlib.sha256(arm.encode())
    for name, module in linears.items():
        w = module.weight.detach().double()
        h.update(f"{name}{tuple(w.shape)}{float(w.sum())!r}{float(w.abs().sum())!r}".encode())
    h.update(json.dumps(calibration).encode())
    return cache / f"{arm}-{h.hexdigest()[:24]}.safetensors"


def _awq(
    model: torch.nn.Module,
    arm: Arm,
    linears: dict[str, torch.nn.Linear],
    calibration: list[list[int]],
    cache: Path | None,
) -> dict[str, float]:
    """AWQ, reusing the scales found earlier for the same weights and calibration."""
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    assert arm.quantize is not None
    path = _awq_cache_file(cache, arm.name, linears, calibration) if cache else None
    if path is not None and path.is_file():
        with safe_open(str(path), "pt") as f:
            alphas = json.loads((f.metadata() or {})["alphas"])
        found = AWQScales(load_file(str(path)), alphas)
    else:
        found = awq_search(model, linears, calibration, arm.quantize)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            scales = {k: v.clone().contiguous() for k, v in found.scales.items()}  # unshared
            save_file(scales, str(tmp), metadata={"alphas": json.dumps(found.alphas)})
            os.replace(tmp, path)
    apply_scales(linears, found, arm.quantize)
    return found.alphas


def apply_arm(
    model: torch.nn.Module,
    arm: str,
    calibration: list[list[int]] | None = None,
    awq_cache: Path | None = None,
) -> ArmResult:
    """Change `model`'s weights in place to arm `arm`. `int4-awq` needs calibration token
    sequences (see `flatscore.models.quant.calibration`); with `awq_cache` (a folder) its scales
    are saved there and reused for the same weights and calibration (~3 s instead of
    minutes)."""
    spec = ARMS.make(ARMS.check(arm))  # an unknown name: ValueError listing the known ones
    linears = quantizable_linears(model)
    if spec.quantize is None:
        return ArmResult(arm, 0.0, {n: 0.0 for n in linears})
    alphas: dict[str, float] = {}
    sums: dict[str, tuple[float, float]] = {}  # per layer: squared error, squared weight

    def measure(name: str, before: torch.Tensor, after: torch.Tensor) -> None:
        sums[name] = (float(((after - before) ** 2).sum()), float((before**2).sum()))

    with torch.no_grad():
        if spec.awq:
            if not calibration:
                raise ValueError(f"arm {arm!r} needs calibration sequences")
            before = {n: m.weight.detach().clone() for n, m in linears.items()}
            alphas = _awq(model, spec, linears, calibration, awq_cache)
            for name, module in linears.items():
                measure(name, before[name], module.weight.data)
            del before
        else:  # one layer at a time: no second copy of every weight (load-time memory)
            for name, module in linears.items():
                quantized = spec.quantize(module.weight.data)
                measure(name, module.weight.data, quantized)
                module.weight.data.copy_(quantized)
                del quantized
        if spec.activations is not None:
            for module in linears.values():
                module.register_forward_pre_hook(QuantizeInput(spec.activations))
    per_layer = {n: (e / r) ** 0.5 if r else 0.0 for n, (e, r) in sums.items()}
    err_sq = sum(e for e, _ in sums.values())
    ref_sq = sum(r for _, r in sums.values())
    return ArmResult(arm, (err_sq / ref_sq) ** 0.5 if ref_sq else 0.0, per_layer, alphas)
