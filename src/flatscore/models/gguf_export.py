"""A transformers Llama-architecture model written as an F16 GGUF, for llama.cpp arms of a
model that exists only in torch: the embedded agent (the Q4_1 base + flatscore's LoRA
adapter, merged in fp32).

The file is a copy of a template GGUF of the same architecture (the base file the model
was loaded from): its metadata and tokenizer as they are, every tensor replaced by the
model's own weights — 2-D matrices in F16, norms in F32, as llama.cpp's converter writes
them. The query and key projections are permuted back to llama.cpp's rotary layout
(transformers' GGUF loader undoes that permutation on load). Known answer, tested: the
exported file loaded back by transformers gives the model's own logits to F16 precision.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from flatscore.errors import InputError

SKIPPED_KEYS = {"general.architecture", "general.file_type", "general.quantization_version"}
"""Template keys the writer sets itself (or that no longer hold)."""
F16_FILE_TYPE = 1  # llama_ftype MOSTLY_F16


def rotary_permute(weight: np.ndarray, heads: int) -> np.ndarray:
    """transformers' q/k rows (rotate-half halves) -> llama.cpp's interleaved pairs, per
    head: the permutation llama.cpp's converter applies."""
    rows = weight.shape[0]
    return (
        weight.reshape(heads, 2, rows // heads // 2, *weight.shape[1:])
        .swapaxes(1, 2)
        .reshape(weight.shape)
    )


def export_f16(model: Any, template: Path, out: Path, *, name: str | None = None) -> Path:
    """Write `model` (a transformers Llama model) as an F16 GGUF at `out`, with `template`'s
    metadata and tokenizer. Written to a temporary name and renamed, so `out` is whole."""
    import gguf

    reader = gguf.GGUFReader(template)
    arch = str(reader.fields["general.architecture"].contents())
    if arch != "llama" or getattr(model.config, "model_type", "") != "llama":
        raise InputError(
            f"only Llama-architecture models are exported to GGUF here (template: {arch!r}, "
            f"model: {getattr(model.config, 'model_type', '?')!r})",
            file=str(template),
        )
    config = model.config
    blocks = int(config.num_hidden_layers)
    heads, kv_heads = int(config.num_attention_heads), int(config.num_key_value_heads)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, blocks)
    expected = {t.name for t in reader.tensors}

    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=out.name + ".", dir=out.parent)
    os.close(fd)
    try:
        writer = gguf.GGUFWriter(tmp, arch)
        for key, field in reader.fields.items():
            if key.startswith("GGUF.") or key in SKIPPED_KEYS:
                continue
            value: Any = field.contents()
            if key == "general.name" and name is not None:
                value = name
            sub = field.types[-1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
            writer.add_key_value(key, value, field.types[0], sub_type=sub)
        writer.add_file_type(F16_FILE_TYPE)
        written = set()
        for hf_name, tensor in model.state_dict().items():
            if hf_name == "lm_head.weight" and "output.weight" not in expected:
                continue  # tied to the token embedding, which the template holds alone
            target = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
            if target is None or target not in expected:
                raise InputError(
                    f"no GGUF tensor for the model's {hf_name!r} (mapped to {target!r})",
                    file=str(template),
                )
            data = tensor.detach().float().cpu().numpy()
            if hf_name.endswith("q_proj.weight"):
                data = rotary_permute(data, heads)
            elif hf_name.endswith("k_proj.weight"):
                data = rotary_permute(data, kv_heads)
            data = data.astype(np.float16 if data.ndim == 2 else np.float32)
            writer.add_tensor(target, data)
            written.add(target)
        if written != expected:
            missing = ", ".join(sorted(expected - written)[:5])
            raise InputError(f"the model has no weights for {missing}", file=str(template))
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out
