"""A tiny random Llama (same architecture as SmolLM2, widths not divisible by 128)."""

from __future__ import annotations

import torch


def tiny_llama(
    seed: int = 0,
    *,
    vocab: int = 96,
    hidden: int = 192,
    heads: int = 3,
    positions: int = 256,
    tied: bool = True,
) -> torch.nn.Module:
    """Two layers, one KV head, frozen; the MLP is 5/3 as wide as `hidden` (192 → 320).
    `vocab=len(tokenizer)` pairs it with a real tokenizer; untie the head (`tied=False`) for
    text that reads as words (tied, greedy decoding repeats one token: "\\n\\n\\n…")."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=hidden * 5 // 3,
        num_hidden_layers=2,
        num_attention_heads=heads,
        num_key_value_heads=1,
        max_position_embeddings=positions,
        tie_word_embeddings=tied,
    )
    model = LlamaForCausalLM(config).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def sequences(n: int = 4, length: int = 40, seed: int = 1) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, 96, (length,), generator=g).tolist() for _ in range(n)]
