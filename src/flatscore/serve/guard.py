"""Who may call `flatscore serve`, and how much: an ASGI middleware in front of the app.

A model server on loopback is still reachable by every web page the user visits (a page can
POST cross-site, and DNS rebinding makes a hostile name resolve to 127.0.0.1). So, before
any route runs:
- the `Host` header must name a loopback address and the peer must be a loopback address,
  unless the server was bound beyond loopback on purpose (`--host`; then use `--api-key`);
- an `Origin` header, which browsers add to cross-site requests, must be a loopback origin;
- a POST must say `Content-Type: application/json` (a page cannot send that without a
  CORS preflight, which this server never answers);
- the body may not exceed `max_body_bytes` (413), counted as it arrives;
- with an API key configured, `Authorization: Bearer <key>` is required (401).
Every refusal, and every 404/405/500, is JSON in OpenAI's error shape.
"""

from __future__ import annotations

import hmac
import ipaddress
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlsplit

import anyio
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from flatscore.models.cancel import GenerationCancelled, run_cancellable

T = TypeVar("T")

MAX_BODY_BYTES = 4 * 1024 * 1024
API_KEY_ENV = "FLATSCORE_SERVE_API_KEY"
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
DISCONNECT_POLL_S = 0.1


def error_body(
    message: str, kind: str = "invalid_request_error", param: str | None = None, code: Any = None
) -> dict[str, Any]:
    """OpenAI's error shape."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def error_response(
    status: int,
    message: str,
    kind: str = "invalid_request_error",
    param: str | None = None,
    code: Any = None,
) -> JSONResponse:
    return JSONResponse(error_body(message, kind, param, code), status)


def _is_loopback(host: str) -> bool:
    host = host.strip("[]").lower()
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _host_part(value: str) -> str:
    """'127.0.0.1:8000' → '127.0.0.1'; '[::1]:8000' → '::1'."""
    return urlsplit(f"//{value}").hostname or ""


@dataclass(frozen=True)
class GuardConfig:
    """`bind_host`: the interface served; `api_key`: required bearer key (None: none)."""

    bind_host: str = "127.0.0.1"
    api_key: str | None = None
    max_body_bytes: int = MAX_BODY_BYTES
    extra_hosts: frozenset[str] = field(default_factory=frozenset)

    @property
    def loopback_only(self) -> bool:
        return _is_loopback(self.bind_host)

    def host_allowed(self, host: str) -> bool:
        """Loopback names always; any name when the server was bound beyond loopback on
        purpose (`--host 0.0.0.0`: clients reach it by names we cannot know)."""
        return _is_loopback(host) or host in self.extra_hosts or not self.loopback_only


class ServeGuard:
    """The ASGI middleware applying `GuardConfig` to every HTTP request."""

    def __init__(self, app: ASGIApp, config: GuardConfig) -> None:
        self.app = app
        self.config = config

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self._refusal(scope)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        # Read the whole (bounded) body first, then hand it to the app in one piece; later
        # receives pass through, so the app still hears about a client that disconnects.
        body = bytearray()
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client left before sending its body
            body += message.get("body", b"")
            if len(body) > self.config.max_body_bytes:
                await self._too_large()(scope, receive, send)
                return
            more = bool(message.get("more_body", False))
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    def _too_large(self) -> Response:
        return error_response(
            413, f"request body larger than {self.config.max_body_bytes} bytes", code="too_large"
        )

    def _refusal(self, scope: Scope) -> Response | None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = _host_part(headers.get("host", "")).lower()
        if not host or not self.config.host_allowed(host):
            return error_response(
                403, "Host header must name this server's loopback address", code="bad_host"
            )
        client = scope.get("client")
        if self.config.loopback_only and client and not _is_loopback(str(client[0])):
            return error_response(403, "only loopback clients may call this server")
        origin = headers.get("origin")
        if origin is not None:
            origin_host = urlsplit(origin).hostname if origin != "null" else None
            if not origin_host or not _is_loopback(origin_host):
                return error_response(
                    403,
                    "cross-origin requests are refused (Origin is not loopback)",
                    code="bad_origin",
                )
        if self.config.api_key is not None:
            auth = headers.get("authorization", "")
            scheme, _, token = auth.partition(" ")
            ok = scheme.lower() == "bearer" and hmac.compare_digest(
                token.strip().encode(), self.config.api_key.encode()
            )
            if not ok:
                return error_response(
                    401,
                    "missing or wrong API key (send Authorization: Bearer <key>)",
                    code="invalid_api_key",
                )
        if scope["method"] == "POST":
            ctype = headers.get("content-type", "").split(";")[0].strip().lower()
            if ctype != "application/json":
                return error_response(415, "Content-Type must be application/json")
            length = headers.get("content-length")
            if length is not None and (
                not length.isdigit() or int(length) > self.config.max_body_bytes
            ):
                return self._too_large()
        return None


async def _http_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
    return error_response(exc.status_code, str(exc.detail), kind)


async def _server_error(_request: Request, _exc: Exception) -> Response:
    return error_response(500, "internal server error", "server_error")


EXCEPTION_HANDLERS: dict[Any, Callable[[Request, Exception], Any]] = {
    HTTPException: _http_error,
    Exception: _server_error,
}


async def run_until_disconnect(request: Request, fn: Callable[[], T]) -> T | None:
    """Run blocking `fn` in a worker thread; if the client disconnects first, signal it to
    stop (see `flatscore.models.cancel`) and return None."""
    cancel = threading.Event()
    done = anyio.Event()
    result: list[T] = []

    async def watch() -> None:
        while not done.is_set():
            if await request.is_disconnected():
                cancel.set()
                return
            with anyio.move_on_after(DISCONNECT_POLL_S):
                await done.wait()

    failure: list[BaseException] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(watch)
        try:
            result.append(
                await anyio.to_thread.run_sync(run_cancellable, cancel, fn, abandon_on_cancel=False)
            )
        except GenerationCancelled:
            pass
        except Exception as exc:  # re-raised below as itself, not as an ExceptionGroup
            failure.append(exc)
        finally:
            done.set()
    if failure:
        raise failure[0]
    return result[0] if result else None
