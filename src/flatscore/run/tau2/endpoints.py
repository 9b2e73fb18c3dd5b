"""Where τ²'s agent and user simulator send their requests: an OpenAI-compatible URL per arm,
or a `flatscore serve` process that flatscore starts for an in-process arm (`Tau2Servers`:
the driver starts them before the jobs that need them run).

`ServerPool` starts each distinct (kind, model, precision) once — torch (`local`) or
llama.cpp (`gguf`) — through the one mechanism for servers flatscore starts
(`flatscore.models.servers`, as a study's `server:` arms): a free loopback port, ready once
it lists its models, its log appended to under the run, and stopped (its process group) when
the pool exits — normally, on an exception or on Ctrl-C; on Linux it dies with its parent
even if that is killed outright.
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from flatscore import defaults
from flatscore.models.servers import ServerPool as Servers
from flatscore.models.servers import ServerProcess, free_port
from flatscore.run.tau2.job import Tau2Endpoint, Tau2Recipe
from flatscore.study.server import ServerSpec

if TYPE_CHECKING:
    from rich.console import Console

    from flatscore.run.jobs import EpisodeJob
    from flatscore.study import Tau2Spec

__all__ = ["ServerPool", "Tau2Servers", "free_port"]


def served_name(path: str, quant: str, kind: str) -> str:
    """The model name a `flatscore serve` child answers to (`gguf:` for llama.cpp)."""
    base = f"{Path(path).name or path}@{quant}"
    return f"gguf:{base}" if kind == "gguf" else base


def _weights(url: str) -> str | None:
    """What the server says plays the model (`/v1/models`), if it says."""
    with contextlib.suppress(httpx.HTTPError, ValueError, KeyError, IndexError, TypeError):
        entry = httpx.get(f"{url}/models", timeout=10).json()["data"][0]
        weights = entry.get("flatscore", {}).get("weights")
        return weights if isinstance(weights, str) else None
    return None


@dataclass
class ServerPool:
    """Starts `flatscore serve` once per (kind, model, precision) and stops all of them on
    exit."""

    log_dir: Path | None = None
    threads: int = 1
    start_timeout_s: float = defaults.TAU2_SERVE_START_TIMEOUT_S
    on_start: Callable[[str, ServerSpec], None] | None = None
    weights: dict[str, str | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        log_dir = self.log_dir or Path(tempfile.gettempdir())
        self.pool = Servers(log_dir=log_dir, on_start=self.on_start)

    @property
    def servers(self) -> dict[tuple[ServerSpec, str], ServerProcess]:
        return self.pool.servers

    def endpoint(self, path: str, quant: str, label: str, kind: str = "local") -> Tau2Endpoint:
        engine = "gguf" if kind == "gguf" else "local"
        spec = ServerSpec(
            kind="flatscore",
            model=path,
            quant=quant,
            engine=engine,
            threads=self.threads,
            start_timeout_s=self.start_timeout_s,
        )
        name = served_name(path, quant, kind)
        served = self.pool.start(name, spec, name)
        if name not in self.weights:
            self.weights[name] = _weights(served.url)
        return Tau2Endpoint(label=label, url=served.url, model=name, weights=self.weights[name])

    def close(self) -> None:
        self.pool.close()

    def __enter__(self) -> ServerPool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class Tau2Servers:
    """The driver's side of τ² jobs, around one run of a plan: `prepare` starts
    `flatscore serve` for the served models the jobs about to run need (none when nothing is
    left to run) and fills their URLs into the jobs, so the jobs can run in any process on
    this machine (local executor, or a Ray instance here; Ray workers on other machines
    reach only `openai` endpoints). On exit it stops every server it started and takes down
    this process's τ² log sink."""

    def __init__(self, spec: Tau2Spec, out_dir: Path, console: Console | None = None) -> None:
        from flatscore.report.server_text import say_starting

        on_start = say_starting(console)
        self.pool = ServerPool(
            log_dir=out_dir / "serve-logs",
            threads=spec.serve_threads,
            start_timeout_s=spec.serve_start_timeout_s,
            on_start=on_start,
        )

    def _resolve(self, endpoint: Tau2Endpoint) -> Tau2Endpoint:
        if not endpoint.served:
            return endpoint
        assert endpoint.serve_path is not None and endpoint.serve_quant is not None
        served = self.pool.endpoint(
            endpoint.serve_path, endpoint.serve_quant, endpoint.label, endpoint.serve_kind
        )
        return endpoint.model_copy(
            update={"url": served.url, "model": served.model, "weights": served.weights}
        )

    def prepare(self, jobs: list[EpisodeJob]) -> list[EpisodeJob]:
        out = []
        for job in jobs:
            if isinstance(job.recipe, Tau2Recipe):
                recipe = job.recipe.model_copy(
                    update={
                        "agent": self._resolve(job.recipe.agent),
                        "user": self._resolve(job.recipe.user),
                    }
                )
                job = job.model_copy(update={"recipe": recipe})
            out.append(job)
        return out

    def __enter__(self) -> Tau2Servers:
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            self.pool.close()
        finally:
            runner = sys.modules.get("flatscore.run.tau2.runner")
            if runner is not None:
                runner.log_to(None)
