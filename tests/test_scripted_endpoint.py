"""The scripted endpoint over real HTTP: the step follows the caller's own turns, the last
step repeats, and stable ids reproduce the ids τ²-bench recorded in the v0.2 fixture files
(which were written against this endpoint's scripts)."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

from scripted_endpoint import GREETING, ScriptedEndpoint, reply

FIXTURES = Path(__file__).parent / "fixtures" / "tau2"
SCRIPTS = {"agent": [GREETING, [("get_user", '{"user_id": "u1"}')], "done"]}


def _post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{url}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())  # type: ignore[no-any-return]


def _turns(n: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": "hi"}] + [{"role": "assistant", "content": "x"}] * n


def test_steps_follow_the_callers_turns_over_http() -> None:
    with ScriptedEndpoint(SCRIPTS, delay_s=0.01) as endpoint:
        call = _post(endpoint.url, {"model": "openai/agent", "messages": _turns(1)})
        text = _post(endpoint.url, {"model": "agent", "messages": _turns(2)})
        again = _post(endpoint.url, {"model": "agent", "messages": _turns(7)})
        assert endpoint.requests == 3
        assert endpoint.model_seconds >= 0.03
    choice = call["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["tool_calls"][0]["function"] == {
        "name": "get_user",
        "arguments": '{"user_id": "u1"}',
    }
    assert text["choices"][0]["message"] == {"role": "assistant", "content": "done"}
    assert again["choices"][0]["message"]["content"] == "done"


def test_ids_are_fresh_unless_stable() -> None:
    body = {"model": "agent", "messages": _turns(1)}
    fresh = {reply(body, SCRIPTS)["choices"][0]["message"]["tool_calls"][0]["id"] for _ in "ab"}
    stable = {
        reply(body, SCRIPTS, stable_ids=True)["choices"][0]["message"]["tool_calls"][0]["id"]
        for _ in "ab"
    }
    assert len(fresh) == 2
    assert len(stable) == 1


def test_stable_ids_are_the_ones_in_the_tau2_fixture() -> None:
    from fixtures.tau2.scripted_server import SCRIPTS as FIXTURE_SCRIPTS

    data = json.loads((FIXTURES / "v0.2" / "ok.json").read_text())
    recorded = []
    served = []
    messages: list[dict[str, Any]] = []
    for m in data["simulations"][0]["messages"]:
        if m["role"] == "assistant" and m.get("tool_calls"):
            body = {"model": "openai/ok-agent", "messages": messages}
            served += [
                c["id"]
                for c in reply(body, FIXTURE_SCRIPTS, stable_ids=True)["choices"][0]["message"][
                    "tool_calls"
                ]
            ]
            recorded += [c["id"] for c in m["tool_calls"]]
        if m["role"] == "assistant":
            messages.append({"role": "assistant"})
    assert recorded
    assert served == recorded
