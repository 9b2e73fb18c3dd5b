"""A fault-injecting OpenAI-compatible HTTP server for the backend tests (stdlib, loopback,
ephemeral port): scripted statuses, bodies, delays and headers; records every request."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def ok_body(
    content: str | None = "hello", tool_calls: list[dict[str, Any]] | None = None, **extra: Any
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "x",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop", **extra}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2},
    }


@dataclass
class Reply:
    """One scripted answer: HTTP status, body (dict -> JSON, str -> raw), delay, headers."""

    status: int = 200
    body: dict[str, Any] | str = field(default_factory=ok_body)
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


class FaultServer:
    """Answers POSTs from a script (the last reply repeats) and records every request."""

    def __init__(self) -> None:
        self.script: list[Reply] = [Reply()]
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                payload = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    server.requests.append(payload)
                    server.headers.append(dict(self.headers))
                    index = len(server.requests) - 1
                    reply = server.script[min(index, len(server.script) - 1)]
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                counted = False
                try:
                    time.sleep(reply.delay_s)
                    # Out of flight before the answer leaves: a client that has its answer
                    # may send the next request before this thread would reach `finally`,
                    # which counted 2 in flight under load with a limit of 1 (flaky, not a
                    # concurrency bug).
                    with server._lock:
                        server.in_flight -= 1
                    counted = True
                    body = reply.body if isinstance(reply.body, str) else json.dumps(reply.body)
                    data = body.encode()
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                finally:
                    if not counted:
                        with server._lock:
                            server.in_flight -= 1

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
