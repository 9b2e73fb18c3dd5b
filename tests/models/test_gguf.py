"""The `gguf` kind on real weights: the embedded SmolLM2 Q4_1 GGUF run by llama.cpp, a Q8_0
made from it by llama.cpp's quantizer, and real episodes through `flatscore run`. Skipped,
with the reason shown, where llama-cpp-python (the `gguf` extra) is not installed."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli_runner import flatscore_process as flatscore
from flatscore.episode import Message
from flatscore.models.base import Sampling
from flatscore.models.gguf_files import EXTRA_HINT, llama_cpp_available, resolve_arm
from run_files import write_study
from sample_chat import order_tool

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not llama_cpp_available(), reason=EXTRA_HINT),
]

TOOLS = [order_tool("get_order", "Look up an order by its id.")]
MESSAGES = [
    Message(role="system", content="You are a retail support agent. Use the tools."),
    Message(role="user", content="Hi, where is my order #W123? It has not arrived."),
]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A cache of our own: the quantized files this module makes."""
    path = tmp_path_factory.mktemp("cache")
    old = os.environ.get("FLATSCORE_CACHE")
    os.environ["FLATSCORE_CACHE"] = str(path)
    yield path
    if old is None:
        os.environ.pop("FLATSCORE_CACHE", None)
    else:
        os.environ["FLATSCORE_CACHE"] = old


@pytest.fixture(scope="module")
def backend(cache: Path):  # type: ignore[no-untyped-def]
    from flatscore.models.gguf import GgufBackend

    b = GgufBackend.from_spec("embedded-base", "ref", threads=1)
    yield b
    b.close()


def test_greedy_is_repeatable_and_reuses_the_cached_prefix(backend) -> None:  # type: ignore[no-untyped-def]
    sampling = Sampling(max_tokens=24, logprobs=True, top_logprobs=3)
    backend.clear_cache()
    first = backend.generate(MESSAGES, TOOLS, sampling)
    again = backend.generate(MESSAGES, TOOLS, sampling)
    assert first.cached_tokens == 0 and again.cached_tokens == first.usage.prompt_tokens - 1
    # The KV-reusing run starts from the restored cache and gives the same bits
    # (docs/benchmarks.md: "GGUF arms batched"); KV restored wrong gives other text.
    assert again.raw_text == first.raw_text and again.logprobs == first.logprobs
    assert first.usage.completion_tokens == len(first.logprobs or []) > 0
    timing = first.message.timing
    assert timing is not None and timing.encoded_tokens == first.usage.prompt_tokens
    assert timing.prefill_s is not None and timing.decode_s is not None
    for lp in first.logprobs or []:  # greedy: the chosen token is the most likely one
        assert lp.top[0].logprob == pytest.approx(lp.logprob, abs=1e-9)
        assert lp.logprob <= 0 and [t.logprob for t in lp.top] == sorted(
            (t.logprob for t in lp.top), reverse=True
        )


def test_seeded_sampling_is_reproducible(backend) -> None:  # type: ignore[no-untyped-def]
    def sample(seed: int) -> str:
        return str(
            backend.generate(
                MESSAGES, TOOLS, Sampling(temperature=1.0, max_tokens=24, seed=seed)
            ).raw_text
        )

    texts = [sample(7), sample(7), sample(8), sample(9)]
    assert texts[0] == texts[1]
    assert len(set(texts[1:])) > 1  # other seeds, other samples


def test_forced_tool_call_parses(backend) -> None:  # type: ignore[no-untyped-def]
    gen = backend.generate(MESSAGES, TOOLS, Sampling(max_tokens=48, tool_choice="required"))
    assert gen.raw_text.startswith("<tool_call>")
    assert gen.message.malformed or gen.message.tool_calls


def test_quantizing_makes_the_type_once(cache: Path) -> None:
    made = resolve_arm("embedded-base", "q8_0")
    assert made.quant == "Q8_0" and made.file.parent == cache / "gguf"
    assert made.tensor_types.get("Q8_0", 0) >= 210  # every linear (576 divides by 32)
    mtime = made.file.stat().st_mtime_ns
    again = resolve_arm("embedded-base", "Q8_0")
    assert again == made and again.file.stat().st_mtime_ns == mtime
    assert f"sha256 {made.sha256}" in made.description and "made from" in made.description


def test_a_study_of_gguf_arms_runs_real_episodes_and_resumes(tmp_path: Path, cache: Path) -> None:
    model = {
        "name": "smol",
        "kind": "gguf",
        "path": "embedded-base",
        "sampling": {"temperature": 0, "max_tokens": 48},
        "arms": ["ref", "Q8_0"],
    }
    path = write_study(
        tmp_path,
        "gguf-smoke",
        [model],
        domains=["retail"],
        split="test",
        tasks_per_domain=1,
        max_steps=6,
        concurrency=2,
    )
    env = {"FLATSCORE_CACHE": str(cache)}
    done = flatscore("run", path, "--no-progress", env=env, timeout=1200)
    assert done.returncode == 0, done.stderr
    runs = sorted((tmp_path / "out" / "runs").glob("*.jsonl"))
    assert [r.name for r in runs] == ["smol__Q8_0.jsonl", "smol__ref.jsonl"]
    for run, quant in zip(runs, ["Q8_0", "Q4_1"], strict=True):
        (episode,) = [json.loads(line) for line in run.read_text("utf-8").splitlines()]
        assert episode["metadata"]["played_by"] == episode["serving"]["backend"]
        assert episode["serving"]["backend"].startswith("gguf:")
        assert f"GGUF {quant}" in episode["metadata"]["weights"]
        assert "sha256 " in episode["metadata"]["weights"]
        assert episode["serving"]["weight_format"] == f"gguf:{quant}"
        agent = [m for m in episode["messages"] if m["role"] == "assistant" and m.get("usage")]
        assert agent and all(m["usage"]["completion_tokens"] > 0 for m in agent)
        assert all(m["timing"]["decode_s"] is not None for m in agent)
    again = flatscore("run", path, "--resume", "--no-progress", env=env, timeout=1200)
    assert again.returncode == 0, again.stderr
    assert all(len(r.read_text("utf-8").splitlines()) == 1 for r in runs)  # nothing rerun
