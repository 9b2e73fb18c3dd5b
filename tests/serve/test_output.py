"""What `flatscore serve` emits, as an OpenAI client (litellm, which τ²-bench uses) sees it.

The served backend is scripted (the serve layer is under test, not the model): a real
uvicorn server on loopback, real litellm calls. Each test here failed before the fix for
the defect it names (issue 17, "Seen when wired by hand").
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from flatscore.episode import Message, ToolCall
from flatscore.models.base import Backend, ContextWindowExceeded, Generation, Sampling
from flatscore.run.tau2.endpoints import free_port
from flatscore.serve.app import DEFAULT_MAX_TOKENS, create_app

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
uvicorn = pytest.importorskip("uvicorn", reason="uvicorn comes with the local extra")

WINDOW = 2000  # the scripted model's context window, in words


class ScriptedBackend(Backend):
    """Replies from a list; counts prompt "tokens" as words and enforces a context window
    exactly as the local backend does (prompt + max_tokens must fit)."""

    name = "scripted"
    max_context = WINDOW

    def __init__(self) -> None:
        self.replies: list[Generation] = []
        self.seen: list[Sampling] = []

    def encode(self, text: str) -> list[str]:
        return text.split()

    def generate(
        self, messages: list[Message], tools: list[dict[str, Any]], sampling: Sampling
    ) -> Generation:
        from flatscore.models.chat_format import render

        self.seen.append(sampling)
        prompt = len(self.encode(render(messages, tools).text))
        if prompt + sampling.max_tokens > self.max_context:
            raise ContextWindowExceeded(
                f"prompt of {prompt} tokens + max_tokens {sampling.max_tokens} exceeds the "
                f"context window of {self.max_context}"
            )
        return self.replies.pop(0) if self.replies else _text("ok")


def _text(text: str) -> Generation:
    return Generation(message=Message(role="assistant", content=text), raw_text=text)


def _call(name: str, arguments: dict[str, Any] | str, raw: str, call_id: str) -> Generation:
    call = ToolCall(id=call_id, name=name, arguments=arguments)
    return Generation(
        message=Message(role="assistant", tool_calls=[call]),
        raw_text=raw,
        finish_reason="tool_calls",
    )


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[ScriptedBackend, str]]:
    backend = ScriptedBackend()
    port = free_port()
    config = uvicorn.Config(
        create_app(backend, "scripted"), host="127.0.0.1", port=port, log_level="error"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline:
            raise TimeoutError("uvicorn did not start")
        time.sleep(0.05)
    yield backend, f"http://127.0.0.1:{port}/v1"
    server.should_exit = True
    thread.join(timeout=10)


def _litellm() -> Any:
    """litellm, imported when a test runs, not at collection: every xdist worker collects
    every file, and importing litellm costs ~6 CPU-seconds."""
    return pytest.importorskip("litellm", reason="litellm comes with the tau2 extra")


def _complete(url: str, messages: list[dict[str, Any]], **kw: Any) -> Any:
    return _litellm().completion(
        model="openai/scripted",
        api_base=url,
        api_key="none",
        messages=messages,
        temperature=0,
        num_retries=0,
        **kw,
    )


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_account",
            "description": "Look an account up.",
            "parameters": {
                "type": "object",
                "properties": {"user_id": {"type": "string"}},
                "required": ["user_id"],
            },
        },
    }
]
HELLO = [{"role": "user", "content": "hello"}]


def test_unparseable_arguments_come_back_as_marked_text(
    served: tuple[ScriptedBackend, str],
) -> None:
    backend, url = served
    raw = '<tool_call>{"name": "get_account": "mia_li_3668"}</tool_call>'
    backend.replies.append(_call("get_account", '"mia_li_3668"', raw, "call_1_0"))
    response = _complete(url, HELLO, tools=TOOLS)
    choice = response.choices[0]
    assert not choice.message.tool_calls  # nothing for json.loads to choke on
    assert choice.message.content == raw
    assert choice.finish_reason == "stop"
    # τ² keeps the choice as `raw_data`; litellm puts unknown fields here
    assert choice.to_dict()["provider_specific_fields"]["flatscore"]["malformed"] is True


def test_parseable_arguments_are_always_a_json_object(
    served: tuple[ScriptedBackend, str],
) -> None:
    backend, url = served
    backend.replies.append(_call("get_account", {"user_id": "mia"}, "...", "call_1_0"))
    call = _complete(url, HELLO, tools=TOOLS).choices[0].message.tool_calls[0]
    assert json.loads(call.function.arguments) == {"user_id": "mia"}


def test_tool_call_ids_never_repeat(served: tuple[ScriptedBackend, str]) -> None:
    """The local backend numbers calls by message index, so the agent's and the user's
    calls at the same index collided (`call_3_0` twice in one telecom conversation)."""
    backend, url = served
    ids = []
    for _ in range(3):
        backend.replies.append(_call("get_account", {"user_id": "x"}, "...", "call_3_0"))
        ids.append(_complete(url, HELLO, tools=TOOLS).choices[0].message.tool_calls[0].id)
    assert len(set(ids)) == 3
    assert all(i.startswith("call_") and len(i) == 29 for i in ids)


def test_overflow_is_litellms_context_window_error(served: tuple[ScriptedBackend, str]) -> None:
    _, url = served
    too_long = [{"role": "user", "content": "word " * (WINDOW + 10)}]
    with pytest.raises(_litellm().ContextWindowExceededError):
        _complete(url, too_long, max_tokens=16)


def test_without_max_tokens_the_reply_gets_what_fits(served: tuple[ScriptedBackend, str]) -> None:
    """A prompt 100 tokens short of the window was refused: the server reserved 512."""
    backend, url = served
    backend.seen.clear()
    near_full = [{"role": "user", "content": "word " * (WINDOW - 120)}]
    assert _complete(url, near_full).choices[0].message.content == "ok"
    fitted = backend.seen[-1].max_tokens
    assert 0 < fitted < 120
    assert _complete(url, HELLO).choices[0].message.content == "ok"
    assert backend.seen[-1].max_tokens == DEFAULT_MAX_TOKENS
    assert _complete(url, HELLO, max_tokens=7).choices[0].message.content == "ok"
    assert backend.seen[-1].max_tokens == 7
