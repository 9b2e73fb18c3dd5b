"""The embedded agent (Q4_1 base + shipped adapter, merged) written as an F16 GGUF: loaded
back by transformers it gives the merged model's own logits to F16 precision. A wrong q/k
permutation or a misplaced tensor would scramble them (checked by planting the first)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from flatscore.models.gguf_export import rotary_permute
from flatscore.models.gguf_files import file_info


def test_rotary_permute_interleaves_each_heads_halves() -> None:
    """Per head, rows [a0 a1 a2 | b0 b1 b2] (transformers' halves) become llama.cpp's
    pairs [a0 b0 a1 b1 a2 b2]."""
    rows = np.arange(12, dtype=np.float32).reshape(12, 1)  # 2 heads of 6 rows
    out = rotary_permute(rows, heads=2)[:, 0].tolist()
    assert out == [0, 3, 1, 4, 2, 5, 6, 9, 7, 10, 8, 11]


@pytest.mark.slow
def test_the_exported_embedded_agent_holds_its_weights_in_llamacpp_layout(tmp_path: Path) -> None:
    """Two known answers, no forward pass: (1) transformers' own GGUF reader logic
    (`LlamaTensorProcessor`, which undoes llama.cpp's q/k permutation) turns every exported
    tensor back into the merged model's weight, to F16 precision; (2) every exported tensor
    is close to the same-named tensor of the base Q4_1 file, which llama.cpp's converter
    wrote: they differ by the adapter's change and 4-bit rounding only, while a misplaced
    tensor or an unpermuted q/k would differ by about as much as the weights themselves."""
    from gguf import GGUFReader
    from gguf.quants import dequantize
    from transformers.modeling_gguf_pytorch_utils import LlamaTensorProcessor

    from flatscore.models.embedded import embedded_gguf, load_model
    from flatscore.models.gguf_export import export_f16

    merged = load_model("embedded")
    out = export_f16(merged.model, embedded_gguf(), tmp_path / "agent.F16.gguf", name="agent")
    info = file_info(out)
    assert info.file_type == "F16" and info.tensor_types == {"F16": 211, "F32": 61}

    config = merged.model.config
    undo = LlamaTensorProcessor(
        config={
            "num_attention_heads": config.num_attention_heads,
            "num_key_value_heads": config.num_key_value_heads,
        }
    )
    weights = {k: v.float().numpy() for k, v in merged.model.state_dict().items()}
    by_gguf_name = {
        "token_embd.weight": weights["model.embed_tokens.weight"],
        "output_norm.weight": weights["model.norm.weight"],
    }
    parts = {
        "attn_q": "self_attn.q_proj",
        "attn_k": "self_attn.k_proj",
        "attn_v": "self_attn.v_proj",
        "attn_output": "self_attn.o_proj",
        "ffn_gate": "mlp.gate_proj",
        "ffn_up": "mlp.up_proj",
        "ffn_down": "mlp.down_proj",
        "attn_norm": "input_layernorm",
        "ffn_norm": "post_attention_layernorm",
    }
    for b in range(config.num_hidden_layers):
        for g, h in parts.items():
            by_gguf_name[f"blk.{b}.{g}.weight"] = weights[f"model.layers.{b}.{h}.weight"]
    base = {t.name: t for t in GGUFReader(embedded_gguf()).tensors}
    worst_base = 0.0
    for tensor in GGUFReader(out).tensors:
        data = np.asarray(tensor.data, dtype=np.float32).reshape(by_gguf_name[tensor.name].shape)
        back = undo.process(data, tensor.name).weights
        want = by_gguf_name[tensor.name]
        scale = float(np.abs(want).max())
        assert float(np.abs(back - want).max()) <= 1e-3 * scale + 1e-6, tensor.name
        ref = base[tensor.name]
        old = dequantize(ref.data, ref.tensor_type).reshape(data.shape)
        rel = float(np.linalg.norm(data - old) / np.linalg.norm(old))
        worst_base = max(worst_base, rel)
    assert worst_base < 0.1, worst_base  # placed right: 0.0002; q unpermuted: 1.39
