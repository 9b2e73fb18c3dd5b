"""Run a compressed-tensors checkpoint (llm-compressor's output) in-process on CPU.

transformers loads it through its compressed-tensors support with `dequantize=True`: every
quantized weight is decompressed (packed int4, int8 or fp8 values times their scales, minus
zero points) into the compute dtype, fp32. The weights are then exactly the checkpoint's
quantized values; only the matmuls run in fp32 instead of a quantized kernel.

Activation quantization is not applied by transformers on that path, so flatscore emulates
what the checkpoint's scheme says (its `input_activations`): dynamic per-token fp8 e4m3 or
symmetric int8, a fresh scale per token at run time, applied to each quantized linear's input
(`QuantizeInput` hooks). Static (calibrated) activation scales and per-tensor strategies
are refused rather than guessed. The KV cache stays fp32 (no recipe here quantizes it).
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

import torch

from flatscore.episode import Checkpoint, Serving
from flatscore.errors import InputError
from flatscore.models.embedded import LoadedModel
from flatscore.models.footprint import Footprint
from flatscore.models.local import LocalBackend
from flatscore.models.quant.arms import QuantizeInput, quantizable_linears
from flatscore.models.quant.floats import fp8_e4m3_per_token

EXTRA_HINT = (
    "compressed-tensors checkpoints need the `compressed` extra: pip install '.[compressed]'"
)


def int_per_token_symmetric(x: torch.Tensor, bits: int = 8) -> torch.Tensor:
    """Activations as compressed-tensors' dynamic int8 token strategy quantizes them: one
    symmetric scale per token (row) from its own maximum, levels -128..127."""
    qmax = 2 ** (bits - 1) - 1
    scale = (x.abs().amax(dim=-1, keepdim=True) / qmax).clamp(min=1e-12)
    return torch.round(x / scale).clamp(-qmax - 1, qmax) * scale


def activation_quantizer(args: dict[str, Any] | None) -> Any:
    """The run-time input quantizer a scheme's `input_activations` asks for (None: A16)."""
    if not args:
        return None
    kind, bits = args.get("type"), args.get("num_bits")
    if not args.get("dynamic") or args.get("strategy") != "token":
        raise InputError(
            f"activation quantization {args} is not emulated (only dynamic per-token)",
            field="quant",
        )
    if kind == "float" and bits == 8:
        return fp8_e4m3_per_token
    if kind == "int" and args.get("symmetric", True):
        return partial(int_per_token_symmetric, bits=int(bits or 8))
    raise InputError(f"activation quantization {args} is not emulated", field="quant")


def quantization_config(folder: Path) -> dict[str, Any]:
    config = json.loads((folder / "config.json").read_text())
    found = config.get("quantization_config")
    if not found or found.get("quant_method") != "compressed-tensors":
        raise InputError(f"{folder} is not a compressed-tensors checkpoint", field="path")
    return dict(found)


def load_compressed(folder: Path, name: str) -> LoadedModel:
    """A compressed-tensors checkpoint decompressed to fp32, its activation quantization
    (if any) as `QuantizeInput` hooks on the quantized linears."""
    try:
        import compressed_tensors  # noqa: F401
    except ImportError:
        raise InputError(EXTRA_HINT, field="quant") from None
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils.quantization_config import CompressedTensorsConfig

    config = quantization_config(folder)
    model = AutoModelForCausalLM.from_pretrained(
        folder, dtype=torch.float32, quantization_config=CompressedTensorsConfig(dequantize=True)
    )
    tokenizer = AutoTokenizer.from_pretrained(folder)
    ignored = set(config.get("ignore") or [])
    groups = list((config.get("config_groups") or {}).values())
    if len(groups) != 1 or groups[0].get("targets") != ["Linear"]:
        raise InputError(f"{folder}: only one scheme over every Linear is supported", field="quant")
    quantize_input = activation_quantizer(groups[0].get("input_activations"))
    if quantize_input is not None:
        for layer, module in quantizable_linears(model).items():
            if layer not in ignored:
                module.register_forward_pre_hook(QuantizeInput(quantize_input))
    model.eval()
    for param in model.parameters():
        param.requires_grad_(False)
    return LoadedModel(model, tokenizer, name, f"{folder.name}, compressed-tensors, decompressed")


def checkpoint_bytes(folder: Path) -> int:
    """Bytes of the checkpoint's tensors (the weight files, less their headers)."""
    from safetensors import safe_open

    total = 0
    for path in sorted(folder.glob("*.safetensors")):
        with safe_open(str(path), "pt") as f:
            for key in f.keys():  # noqa: SIM118 (safe_open is not a mapping)
                t = f.get_slice(key)
                total += int(torch.Size(t.get_shape()).numel()) * _itemsize(t.get_dtype())
    return total


def _itemsize(dtype: str) -> int:
    return {"F64": 8, "I64": 8, "F32": 4, "I32": 4, "F16": 2, "BF16": 2, "I16": 2}.get(dtype, 1)


class CompressedBackend(LocalBackend):
    """The local backend over an llm-compressor checkpoint; its episodes record the
    checkpoint (`Serving.checkpoint`) and its real stored bytes."""

    checkpoint: Checkpoint

    @classmethod
    def from_checkpoint(
        cls, checkpoint: Checkpoint, arm: str, compute: str = "fp32", **kwargs: Any
    ) -> CompressedBackend:
        from flatscore.models.batching import release_freed_memory
        from flatscore.models.compute import apply_compute

        assert checkpoint.path is not None
        folder = Path(checkpoint.path)
        reference = json.loads(
            (Path(folder).parent / "references" / checkpoint.reference_sha256[:24])
            .joinpath("reference.json")
            .read_text()
        )
        loaded = load_compressed(folder, reference["name"])  # the backend adds "@<arm>"
        apply_compute(loaded.model, compute)
        release_freed_memory()
        backend = cls(loaded, arm=arm, **kwargs)
        backend.checkpoint = checkpoint
        params = sum(p.numel() for p in loaded.model.parameters())
        resident = sum(p.numel() * p.element_size() for p in loaded.model.parameters())
        backend._footprint = Footprint(params, checkpoint_bytes(folder), resident)
        return backend

    def serving(self) -> Serving:
        return super().serving().model_copy(update={"checkpoint": self.checkpoint})


def from_spec(
    model: str, arm: str, recipe: str, adapter: str | None = None, **kwargs: Any
) -> CompressedBackend:
    """The backend of a study arm whose `quant` names an llm-compressor recipe: its
    checkpoint of `model` (+ `adapter`) is made on first use (the quantization environment)
    and read from the cache afterwards."""
    from flatscore.models.quant.recipes import get_recipe
    from flatscore.models.quant.toolchain import make_checkpoint

    checkpoint = make_checkpoint(get_recipe(recipe), model, adapter)
    return CompressedBackend.from_checkpoint(checkpoint, arm, **kwargs)
