"""A deterministic OpenAI-compatible chat server that replays scripted turns (stdlib,
loopback). It stands in for the *model* so that τ²-bench's own code — tasks, environment,
user simulator, orchestrator, evaluator, litellm — runs for real against real HTTP.

The script is picked by the requested model name; the step is how many turns the caller
already produced (its earlier turns arrive with role `assistant`, for τ²'s user simulator
too, whose roles are flipped), so the server keeps no per-conversation state and any number
of conversations may run at once. Every scripted tool call has a fresh random id.

In-process: `with ReplayServer(delay_s=0.05) as s: s.url`. As a process (for kill tests):
`python replay_server.py PORT [DELAY_S]` prints `ready` once listening.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Step = str | list[tuple[str, str]]  # text, or tool calls as (name, raw argument text)

GREETING = "(τ²'s fixed greeting, never served)"

SCRIPTS: dict[str, list[Step]] = {
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


def reply(body: dict[str, Any]) -> dict[str, Any]:
    model = str(body["model"]).split("/")[-1]
    script = SCRIPTS[model]
    step = sum(1 for m in body["messages"] if m.get("role") == "assistant")
    planned = script[min(step, len(script) - 1)]
    message: dict[str, Any] = {"role": "assistant", "content": None}
    if isinstance(planned, str):
        message["content"] = planned
        finish = "stop"
    else:
        message["tool_calls"] = [
            {
                "id": f"call_{uuid.uuid4().hex[:24]}",
                "type": "function",
                "function": {"name": name, "arguments": args},
            }
            for name, args in planned
        ]
        finish = "tool_calls"
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "finish_reason": finish, "message": message}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


class ReplayServer:
    """The server in a background thread; `model_seconds` sums the time spent "generating"
    (the scripted delay), `requests` counts chat requests."""

    def __init__(self, delay_s: float = 0.0, port: int = 0) -> None:
        self.delay_s = delay_s
        self.requests = 0
        self.model_seconds = 0.0
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                self._send({"status": "ok"})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                t0 = time.perf_counter()
                if server.delay_s:
                    time.sleep(server.delay_s)
                data = reply(body)
                with server._lock:
                    server.requests += 1
                    server.model_seconds += time.perf_counter() - t0
                self._send(data)

            def _send(self, obj: dict[str, Any]) -> None:
                data = json.dumps(obj).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> ReplayServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


if __name__ == "__main__":
    srv = ReplayServer(
        delay_s=float(sys.argv[2]) if len(sys.argv) > 2 else 0.0, port=int(sys.argv[1])
    )
    print("ready", flush=True)
    threading.Event().wait()
