"""A deterministic OpenAI-compatible chat endpoint that replays scripted turns (stdlib only,
loopback). It stands in for a *model* so that everything around it — τ²-bench's tasks,
environment, user simulator, orchestrator and evaluator, litellm, flatscore's runner — runs
for real against real HTTP, with small known content.

The script is picked by the requested model name (`openai/<script>` → `<script>`); the step
is how many turns the caller already produced (its earlier turns arrive with role
`assistant`, for τ²'s user simulator too, whose roles are flipped), so the server keeps no
per-conversation state and any number of conversations may run at once. A step is a text
answer or a list of tool calls. Agent scripts start with `GREETING`: τ² opens every
conversation with a fixed agent greeting that the agent's requests carry as their first
`assistant` turn, so that step is never served.

Tool-call ids are fresh random ones, or (`stable_ids`) derived from model, step and position,
so that files written against the endpoint are the same on every run.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Step = str | list[tuple[str, str]]  # text, or tool calls as (name, raw argument text)
Scripts = Mapping[str, Sequence[Step]]

GREETING = "(τ²'s fixed greeting, never served)"

# Scripts that run in every τ² domain (the live τ² tests and benchmarks/tau2_live.py).
TAU2_SCRIPTS: dict[str, list[Step]] = {
    # Works in every τ² domain: in retail `toggle_roaming` is an unknown tool and the order
    # does not exist; in telecom the first is the *user's* tool (a role confusion) and the
    # second an unknown one. Two failed agent calls, one text answer, then the user stops.
    "live-agent": [
        GREETING,
        [("toggle_roaming", "{}")],
        [("get_order_details", '{"order_id": "#W0000000"}')],
        "I could not find that order. Is there anything else?",
        "Goodbye.",
    ],
    # A second arm that makes one failed call only.
    "live-agent-b": [
        GREETING,
        [("get_order_details", '{"order_id": "#W0000000"}')],
        "Sorry, that order does not exist.",
        "Goodbye.",
    ],
    "live-user": [
        "Hi, I need help with my order #W0000000.",
        "Thanks, that's all. ###STOP###",
    ],
    # Opens, then sends a tool call whose arguments are not JSON: τ²'s `generate` raises on
    # the user's turn (a crash on the user simulator's side, not the agent's).
    "garbled-user": [
        "Hi, I need help with my order #W0000000.",
        [("find_order", "{not json")],
    ],
    # Never stops: the episode ends at max_steps.
    "chatty-user": ["Tell me more."] * 200,
}


def _stable_id(model: str, step: int, index: int) -> str:
    return "call_" + hashlib.sha256(f"{model}/{step}/{index}".encode()).hexdigest()[:8]


def reply(body: Mapping[str, Any], scripts: Scripts, *, stable_ids: bool = False) -> dict[str, Any]:
    """The chat completion for request `body`: the step of its model's script that follows
    the turns the caller already made (the last step repeats once the script runs out)."""
    model = str(body["model"]).split("/")[-1]
    script = scripts[model]
    step = sum(1 for m in body["messages"] if m.get("role") == "assistant")
    planned = script[min(step, len(script) - 1)]

    def call_id(index: int) -> str:
        return _stable_id(model, step, index) if stable_ids else f"call_{uuid.uuid4().hex[:24]}"

    message: dict[str, Any] = {"role": "assistant", "content": None}
    if isinstance(planned, str):
        message["content"] = planned
        finish = "stop"
    else:
        message["tool_calls"] = [
            {"id": call_id(i), "type": "function", "function": {"name": name, "arguments": args}}
            for i, (name, args) in enumerate(planned)
        ]
        finish = "tool_calls"
    return {
        "id": "chatcmpl-" + call_id(99)[5:],
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "finish_reason": finish, "message": message}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


class ScriptedEndpoint:
    """The endpoint in a background thread at `url` (`…/v1`); every chat request sleeps
    `delay_s` first, as a model would take time. `requests` counts chat requests and
    `model_seconds` sums the time spent on them. `with ScriptedEndpoint(scripts) as s: s.url`."""

    def __init__(
        self,
        scripts: Scripts,
        *,
        delay_s: float = 0.0,
        port: int = 0,
        stable_ids: bool = False,
    ) -> None:
        self.scripts = scripts
        self.delay_s = delay_s
        self.stable_ids = stable_ids
        self.requests = 0
        self.model_seconds = 0.0
        self._lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), _handler(self))
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    def answer(self, body: Mapping[str, Any]) -> dict[str, Any]:
        t0 = time.perf_counter()
        if self.delay_s:
            time.sleep(self.delay_s)
        data = reply(body, self.scripts, stable_ids=self.stable_ids)
        with self._lock:
            self.requests += 1
            self.model_seconds += time.perf_counter() - t0
        return data

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> ScriptedEndpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _handler(endpoint: ScriptedEndpoint) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self._send({"status": "ok"})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            self._send(endpoint.answer(body))

        def _send(self, obj: dict[str, Any]) -> None:
            data = json.dumps(obj).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def serve_forever(
    scripts: Scripts, port: int, *, delay_s: float = 0.0, stable_ids: bool = False
) -> None:
    """Run the endpoint in this process until it is killed; prints `ready` once listening
    (for tests that kill the process mid-run)."""
    ScriptedEndpoint(scripts, delay_s=delay_s, port=port, stable_ids=stable_ids)
    print("ready", flush=True)
    threading.Event().wait()
