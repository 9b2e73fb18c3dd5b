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
def test_the_exported_embedded_agent_reproduces_its_logits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    from flatscore.models.embedded import embedded_gguf, load_model
    from flatscore.models.gguf_export import export_f16
    from flatscore.quant.calibration import bundled, token_sequences

    merged = load_model("embedded")
    out = export_f16(merged.model, embedded_gguf(), tmp_path / "agent.F16.gguf", name="agent")
    info = file_info(out)
    assert info.file_type == "F16" and info.tensor_types == {"F16": 211, "F32": 61}
    monkeypatch.setenv("FLATSCORE_CACHE", str(tmp_path / "cache"))  # its safetensors copy
    back = load_model(str(out))
    ids = token_sequences(merged.tokenizer, bundled("heldout")[:1])[0][:400]
    with torch.inference_mode():
        want = merged.model(torch.tensor([ids])).logits[0]
        got = back.model(torch.tensor([ids])).logits[0]
    agree = float((want.argmax(-1) == got.argmax(-1)).float().mean())
    assert agree >= 0.98, agree  # F16 rounding flips only near-ties
    assert float((want - got).abs().mean()) < 0.05 * float(want.abs().mean())
