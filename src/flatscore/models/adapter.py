"""The shipped LoRA adapter of the embedded agent, and merging it into the base weights.

The embedded model = the Q4_1 GGUF base dequantized to fp32 + this adapter merged
(W + B·A·alpha/r). Precision arms are applied afterwards, to the merged weights. The
adapter lives in `flatscore/models/embedded_adapter/` (peft format: `adapter_config.json` +
`adapter_model.safetensors`); `$FLATSCORE_EMBEDDED_ADAPTER` points at another adapter
directory (e.g. a training checkpoint) and `none` there disables it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from flatscore.errors import InputError

ADAPTER_DIR = Path(__file__).parent / "embedded_adapter"
ADAPTER_FILE = "adapter_model.safetensors"
ADAPTER_ENV = "FLATSCORE_EMBEDDED_ADAPTER"


def shipped_adapter() -> Path | None:
    """The adapter directory the embedded model uses, or None when there is none."""
    override = os.environ.get(ADAPTER_ENV)
    if override is not None:
        if override.lower() in ("", "none", "0"):
            return None
        path = Path(override).expanduser()
        if not (path / ADAPTER_FILE).is_file():
            # A typo here would silently evaluate a different model: refuse instead.
            raise InputError(
                f"has no {ADAPTER_FILE} (set by ${ADAPTER_ENV}; use 'none' for the base model)",
                file=str(path),
            )
        return path
    return ADAPTER_DIR if (ADAPTER_DIR / ADAPTER_FILE).is_file() else None


def adapter_sha256(adapter_dir: Path) -> str:
    """sha256 of the adapter's weights file: names the adapter in every episode's metadata."""
    import hashlib

    return hashlib.sha256((adapter_dir / ADAPTER_FILE).read_bytes()).hexdigest()


def merge_adapter(model: Any, adapter_dir: Path) -> Any:
    """`model` with the LoRA adapter in `adapter_dir` merged into its weights (returns the
    plain transformers model; the adapter's modules are gone after merging)."""
    from peft import PeftModel

    peft_model = PeftModel.from_pretrained(model, str(adapter_dir))
    return peft_model.merge_and_unload()


def merge_named_adapter(
    model: Any, name: str, description: str, adapter: str
) -> tuple[Any, str, str]:
    """`model` with the adapter in directory `adapter` merged, named as such (provenance:
    the adapter's sha256 goes into every episode's model description)."""
    path = Path(adapter).expanduser()
    if not (path / ADAPTER_FILE).is_file():
        raise InputError(f"not a LoRA adapter directory (no {ADAPTER_FILE})", file=str(path))
    merged = merge_adapter(model, path)
    which = f"the LoRA adapter at {path} (sha256 {adapter_sha256(path)[:12]})"
    return merged, f"{name}+lora", f"{description}, with {which} merged in fp32"


def apply_shipped_adapter(model: Any, name: str, description: str) -> tuple[Any, str, str]:
    """The hook `load_model("embedded")` calls: merge the shipped adapter if there is one."""
    adapter = shipped_adapter()
    if adapter is None:
        return model, name, description
    merged = merge_adapter(model, adapter)
    shipped = adapter.resolve() == ADAPTER_DIR.resolve()
    which = "the shipped flatscore LoRA adapter" if shipped else f"the LoRA adapter at {adapter}"
    which += f" (sha256 {adapter_sha256(adapter)[:12]})"  # which adapter played: provenance
    return (
        merged,
        f"{name}+flatscore-lora",
        f"{description}, with {which} merged in fp32",
    )
