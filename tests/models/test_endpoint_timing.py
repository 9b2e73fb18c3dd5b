"""An endpoint's own prefill/decode timing (llama.cpp's `timings`) reaches the turn's
`Message.timing`; servers that send none (vLLM, OpenAI) leave it null."""

from __future__ import annotations

from typing import Any

import pytest

from flatscore.models.openai import OpenAIBackend
from flatscore.models.wire import endpoint_timing


def body(timings: Any = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "choices": [{"message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 8},
    }
    if timings is not None:
        out["timings"] = timings
    return out


def test_llama_cpp_timings_become_the_turns_timing() -> None:
    timings = {"prompt_n": 100, "prompt_ms": 250.0, "predicted_n": 8, "predicted_ms": 400.0}
    gen = OpenAIBackend.to_generation(body(timings), latency_s=0.7, cached=False)
    t = gen.message.timing
    assert t is not None and t.source == "endpoint"
    assert (t.prefill_s, t.decode_s, t.encoded_tokens) == (0.25, 0.4, 100)
    assert gen.message.latency_s == 0.7  # the client's own clock, kept apart


def test_no_timings_no_timing() -> None:
    assert OpenAIBackend.to_generation(body(), latency_s=0.1, cached=False).message.timing is None


@pytest.mark.parametrize(
    "timings",
    [None, "fast", [], {}, {"prompt_ms": -1}, {"prompt_ms": True}, {"predicted_ms": float("nan")}],
)
def test_odd_timings_are_ignored(timings: Any) -> None:
    assert endpoint_timing(timings) is None
