"""The batch engine on Gemma 3's architecture (a tiny random one): sliding-window layers,
rotary embeddings per layer type. Its logits must be the model's own forward pass's, at
prompts and generations longer than the window, prefilled in chunks after cached
positions and decoded one token at a time."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch

from flatscore.models.batching import BatchEngine, Request

WINDOW = 8


def tiny_gemma3() -> Any:
    """Three layers (sliding, full, sliding) with a window of 8 positions."""
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    torch.manual_seed(0)
    config = Gemma3TextConfig(
        vocab_size=96,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=3,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        query_pre_attn_scalar=32,
        sliding_window=WINDOW,
        layer_types=["sliding_attention", "full_attention", "sliding_attention"],
        max_position_embeddings=256,
    )
    model = Gemma3ForCausalLM(config).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def engine_logits(model: Any, prompt: list[int], new: int) -> tuple[list[int], list[Any]]:
    """Greedy generation through the engine (prefill in chunks of 5): tokens and logits."""
    tokens: list[int] = []
    logits: list[Any] = []

    def step(x: torch.Tensor) -> int | None:
        logits.append(x.clone())
        tokens.append(int(torch.argmax(x)))
        return tokens[-1] if len(tokens) < new else None

    BatchEngine(model, chunk=5).run(Request(ids=prompt, step=step, max_new=new))
    return tokens, logits


@pytest.mark.filterwarnings("ignore::UserWarning")  # transformers on the tiny config
def test_the_engine_computes_gemma3s_own_forward_beyond_its_window() -> None:
    model = tiny_gemma3()
    reference = copy.deepcopy(model)  # keeps transformers' attention and masks
    prompt = torch.randint(0, 96, (23,), generator=torch.Generator().manual_seed(1)).tolist()
    tokens, logits = engine_logits(model, prompt, new=10)

    full = torch.tensor([prompt + tokens[:-1]])
    expected = reference(full).logits[0, len(prompt) - 1 :]
    assert len(logits) == expected.shape[0] == 10
    for got, want in zip(logits, expected, strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-4)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_the_window_matters_in_this_comparison() -> None:
    """The comparison above can fail: the same weights attending to every position (the
    engine before it knew windows) are far from the model's own forward pass."""
    model = tiny_gemma3()
    reference = copy.deepcopy(model)
    for layer in model.model.layers:
        layer.self_attn.sliding_window = None
    prompt = torch.randint(0, 96, (23,), generator=torch.Generator().manual_seed(1)).tolist()
    tokens, logits = engine_logits(model, prompt, new=10)
    expected = reference(torch.tensor([prompt + tokens[:-1]])).logits[0, len(prompt) - 1 :]
    assert max(float((g - w).abs().max()) for g, w in zip(logits, expected, strict=True)) > 1e-2
