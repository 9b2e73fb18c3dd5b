"""The local backend's mechanics on the suite's tiny random Llama with the real SmolLM2
tokenizer (tests/conftest.py `tiny_loaded`: KV reuse, sampling, logprobs, stop strings,
forced calls, context limit, transcripts); the cost record of the real embedded model is the
slow test at the end."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from flatscore.episode import Message, ToolCall, ToolResult
from flatscore.models.base import ContextWindowExceeded, Sampling
from flatscore.models.local import LocalBackend
from sample_chat import START, TOOLS


@pytest.fixture(scope="module")
def backend(tiny_loaded: Any) -> LocalBackend:
    return LocalBackend(tiny_loaded)


def episode(b: LocalBackend, turns: int = 3, tokens: int = 16) -> list[Any]:
    """A growing conversation: model turn, then a tool result or user message, repeated."""
    msgs = list(START)
    gens = []
    for t in range(turns):
        gen = b.generate(msgs, TOOLS, Sampling(max_tokens=tokens, logprobs=True))
        gens.append(gen)
        msgs.append(gen.message)
        if t == 0:
            msgs.append(
                Message(
                    role="assistant",
                    tool_calls=[
                        ToolCall(id="c0", name="get_order_details", arguments={"order_id": "#W123"})
                    ],
                )
            )
            msgs.append(
                Message(
                    role="tool",
                    tool_result=ToolResult(
                        call_id="c0", text='{"status": "shipped", "courier": "UPS"}'
                    ),
                )
            )
        else:
            msgs.append(Message(role="user", content=f"Thanks. One more question ({t})?"))
    return gens


def test_kv_reuse_gives_the_same_tokens_as_full_reencode(tiny_loaded: Any) -> None:
    reuse = LocalBackend(tiny_loaded, reuse_kv=True)
    full = LocalBackend(tiny_loaded, reuse_kv=False)
    with_reuse, without = episode(reuse), episode(full)
    for a, b in zip(with_reuse, without, strict=True):
        assert a.raw_text == b.raw_text
        assert [t.token for t in a.logprobs] == [t.token for t in b.logprobs]
        for x, y in zip(a.logprobs, b.logprobs, strict=True):
            assert x.logprob == pytest.approx(y.logprob, abs=2e-3)
    prompts = sum(g.usage.prompt_tokens for g in without)
    assert full.encoded_tokens == prompts
    assert reuse.encoded_tokens < 0.6 * prompts  # only the new tokens were encoded


def test_greedy_is_deterministic_and_seeded_sampling_reproducible(backend: LocalBackend) -> None:
    greedy = Sampling(max_tokens=12)
    assert (
        backend.generate(START, TOOLS, greedy).raw_text
        == backend.generate(START, TOOLS, greedy).raw_text
    )
    # A hot temperature: a confident model (the fine-tuned embedded agent is one) often
    # writes the same 12 tokens at 1.0 whatever the seed.
    s1 = Sampling(max_tokens=12, temperature=3.0, seed=7)
    a, b = backend.generate(START, TOOLS, s1), backend.generate(START, TOOLS, s1)
    assert a.raw_text == b.raw_text
    others = {
        backend.generate(START, TOOLS, Sampling(max_tokens=12, temperature=3.0, seed=s)).raw_text
        for s in (1, 2, 3)
    }
    assert len(others | {a.raw_text}) > 1


def test_logprobs_top_k_and_teacher_forcing_agree(backend: LocalBackend) -> None:
    gen = backend.generate(START, TOOLS, Sampling(max_tokens=8, logprobs=True, top_logprobs=5))
    assert gen.logprobs is not None and len(gen.logprobs) == gen.usage.completion_tokens == 8
    for t in gen.logprobs:
        assert len(t.top) == 5
        assert [a.logprob for a in t.top] == sorted((a.logprob for a in t.top), reverse=True)
        assert t.top[0].token == t.token and t.top[0].logprob == pytest.approx(t.logprob)
    # one teacher-forced pass over prompt + output gives the same log-probabilities
    from flatscore.models.chat_format import render

    prompt = backend.encode(render(START, TOOLS).text)
    out = backend.encode(gen.raw_text)
    ids = prompt + out
    logits = backend.teacher_force(ids, list(range(len(prompt), len(ids))))
    forced = torch.log_softmax(logits, dim=-1)[torch.arange(len(out)), torch.tensor(out)]
    assert forced.tolist() == pytest.approx([t.logprob for t in gen.logprobs], abs=2e-3)


def test_stop_strings_and_max_tokens(backend: LocalBackend) -> None:
    free = backend.generate(START, TOOLS, Sampling(max_tokens=10))
    assert free.finish_reason == "length" and free.usage.completion_tokens == 10
    word = free.raw_text.split()[1]
    stopped = backend.generate(START, TOOLS, Sampling(max_tokens=10, stop=(word,)))
    assert stopped.finish_reason == "stop" and word not in stopped.raw_text
    assert free.raw_text.startswith(stopped.raw_text)


def test_tool_choice_required_forces_a_call_block(backend: LocalBackend) -> None:
    gen = backend.generate(START, TOOLS, Sampling(max_tokens=30, tool_choice="required"))
    assert gen.raw_text.startswith("<tool_call>")
    assert gen.message.tool_calls or gen.message.malformed  # a call, or counted as malformed
    named = backend.generate(
        START,
        TOOLS,
        Sampling(
            max_tokens=20,
            tool_choice={"type": "function", "function": {"name": "get_order_details"}},
        ),
    )
    assert named.message.tool_calls and named.message.tool_calls[0].name == "get_order_details"
    assert named.message.tool_calls[0].id == f"call_{len(START)}_0"


def test_context_overflow_raises_a_backend_error(tiny_loaded: Any) -> None:
    small = LocalBackend(tiny_loaded, max_context=64)
    with pytest.raises(ContextWindowExceeded):
        small.generate(START, TOOLS, Sampling(max_tokens=32))


def test_transcript_marks_agent_tokens(backend: LocalBackend) -> None:
    msgs = [*START, Message(role="assistant", content="It shipped with UPS.")]
    tr = backend.transcript(msgs, TOOLS)
    agent = [i for i, m in enumerate(tr.agent_mask) if m]
    # the tail: reply + <|im_end|>; the newline closing the turn is not the agent's
    assert agent == list(range(agent[0], len(tr.ids) - 1))
    assert backend.tokenizer.decode([tr.ids[i] for i in agent]) == "It shipped with UPS.<|im_end|>"
    assert {tr.message_index[i] for i in agent} == {2}
    logits = backend.teacher_force(tr.ids, agent)
    assert logits.shape == (len(agent), backend.model.config.vocab_size)


@pytest.mark.slow
def test_each_turn_records_its_prefill_and_decode_and_the_arm_its_footprint(
    loaded_model: Any,
) -> None:
    """Cost recording (docs/analysis.md, "Cost"): the split adds up to the latency, the
    second turn of a growing conversation re-encodes only its new tokens, and the reference
    arm's format bytes are its resident fp32 bytes (4 bytes a parameter)."""
    backend = LocalBackend(loaded_model)
    first, second = episode(backend, turns=2, tokens=8)[:2]
    for gen in (first, second):
        t = gen.message.timing
        assert t is not None and t.source == "backend"
        assert t.prefill_s is not None and t.decode_s is not None and t.decode_s > 0
        assert abs(t.prefill_s + t.decode_s - gen.latency_s) < 0.05
        assert t.encoded_tokens == gen.usage.prompt_tokens - gen.cached_tokens
    assert second.message.timing is not None and second.message.timing.encoded_tokens is not None
    assert second.message.timing.encoded_tokens < second.usage.prompt_tokens
    serving = backend.serving()
    assert serving.parameters is not None and serving.parameters > 100_000_000
    assert serving.weight_bytes == serving.resident_weight_bytes == 4 * serving.parameters
    assert serving.bits_per_parameter == 32.0
    assert serving.peak_rss_bytes is not None and serving.peak_rss_bytes > serving.weight_bytes
