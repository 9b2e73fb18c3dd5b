"""Helpers of the tests that start server processes: whether a process is gone, and the skip
marks of the tests that need llama.cpp's own server (llama-cpp-python and its server
packages, the `gguf` extra)."""

from __future__ import annotations

import importlib.util
import os
import time

import pytest

from flatscore.models.gguf_files import EXTRA_HINT, llama_cpp_available

SERVER_PACKAGES = ("fastapi", "sse_starlette", "starlette_context", "pydantic_settings", "uvicorn")
"""What `python -m llama_cpp.server` imports beyond llama-cpp-python."""


def server_packages() -> bool:
    return all(importlib.util.find_spec(n) is not None for n in SERVER_PACKAGES)


NEEDS_LLAMA_CPP_SERVER = [
    pytest.mark.skipif(not llama_cpp_available(), reason=EXTRA_HINT),
    pytest.mark.skipif(
        not server_packages(),
        reason="llama.cpp's server packages are not installed: pip install 'flatscore[gguf]' "
        "(fastapi, sse-starlette, starlette-context, pydantic-settings, uvicorn)",
    ),
]
"""Skip, with the reason shown, where llama.cpp's server cannot run."""


def gone(pid: int, within_s: float = 20.0) -> bool:
    """Whether process `pid` ends within `within_s` (a child of ours once it is reaped)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:  # our own child: gone once reaped
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return True
        except ChildProcessError:
            pass
        time.sleep(0.1)
    return False
