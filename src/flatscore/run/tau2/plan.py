"""The τ²-specific part of planning a study (`flatscore.run.driver.plan_study` calls it): which
τ² tasks, τ²'s per-trial seeds, and each arm's `Tau2Recipe`. The jobs themselves, their
order, resume and writing are the study's own.

- **Pairing**: every arm runs the same (domain, task, trial) list; trial t uses τ²'s own
  seed for it (`random.seed(seed)`, then one `randint(0, 1_000_000)` per trial, as
  `tau2.run.run_tasks` does), for every task and every arm. The user simulator is one
  endpoint with one sampling setting for all arms, so only the agent differs.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from flatscore.errors import InputError
from flatscore.models.shared import BACKENDS, kind_takes
from flatscore.run.arm_backend import arm_backend
from flatscore.run.tau2 import lib
from flatscore.run.tau2.job import Tau2Endpoint, Tau2Recipe
from flatscore.study import AGENT_KIND, Tau2Spec, Tau2UserSpec
from flatscore.study.tau2 import tau2_domain

if TYPE_CHECKING:
    from flatscore.study import ModelSpec, Study

LOG_FILE = "tau2.log"
RUN_SUFFIX = "__tau2"
"""τ² run files are `<model>__<arm>__tau2.jsonl`, apart from the built-in domains' files."""


def tau2_seeds(seed: int, trials: int) -> list[int]:
    """τ²'s per-trial seeds (`tau2.run.run_tasks`): the same for every task and arm."""
    rng = random.Random(seed)
    return [rng.randint(0, 1000000) for _ in range(trials)]


def tau2_spec(study: Study) -> Tau2Spec:
    spec: Tau2Spec | None = getattr(study, "tau2", None)
    if spec is None:
        raise InputError(
            "τ² domains need a 'tau2' section (at least tau2.user: the user simulator)",
            field="tau2",
        )
    return spec


def check_study(study: Study) -> None:
    """What a study with τ² domains may not ask for, as one line naming the field."""
    if study.repair.mode != "off":
        raise InputError("reflective repair is not available on τ² domains", field="repair")
    if study.error_budget.max_errors is None or study.error_budget.counted != "all":
        raise InputError(
            "τ² counts every error (agent and user) and needs a limit: "
            "error_budget: {max_errors: N, counted: all}",
            field="error_budget",
        )
    for i, model in enumerate(study.models):
        if model.kind == AGENT_KIND:
            raise InputError(
                "τ² domains run τ²'s LLM agent: give a model of a backend kind "
                f"({', '.join(BACKENDS.names())})",
                field=f"models.{i}.kind",
            )


def task_ids(study: Study, domain: str) -> list[str]:
    """τ²'s task ids for a `tau2:` domain of the study, in τ²'s order (loads τ²-bench)."""
    t2 = lib.load()
    spec = tau2_spec(study)
    try:
        tasks = t2.get_tasks(
            task_set_name=tau2_domain(domain),
            task_split_name=spec.task_split,
            task_ids=spec.task_ids,
            num_tasks=spec.num_tasks,
        )
    except (ValueError, KeyError) as exc:
        raise InputError(f"τ² domain {tau2_domain(domain)}: {exc}", field="tau2") from None
    return [str(task.id) for task in tasks]


def _agent_endpoint(model: ModelSpec, arm: str, limits: dict[str, Any]) -> Tau2Endpoint:
    spec = model.arms[arm]
    if kind_takes(model.kind, "url"):  # a server that is up
        if spec.server is not None:
            raise InputError(
                f"arm {arm!r} of model {model.name!r}: server arms run on the built-in "
                "domains only (for τ² domains, start the server and give its url)",
                field="models",
            )
        assert spec.url is not None and spec.served_model is not None
        return Tau2Endpoint.openai(
            spec.url, spec.served_model, spec.api_key_env or model.api_key_env, **limits
        )
    if kind_takes(model.kind, "file"):  # llama.cpp: the file and type the arm plays
        from flatscore.models.gguf_files import quant_type

        backend = arm_backend(model, arm)
        assert backend is not None
        return Tau2Endpoint.serve(
            backend.path, quant_type(backend.quant) or backend.quant, gguf=True, **limits
        )
    return Tau2Endpoint.serve(model.path or "embedded", spec.quant or arm, **limits)


def _user_endpoint(user: Tau2UserSpec, limits: dict[str, Any]) -> Tau2Endpoint:
    if kind_takes(user.kind, "url"):
        assert user.url is not None and user.served_model is not None
        return Tau2Endpoint.openai(user.url, user.served_model, user.api_key_env, **limits)
    return Tau2Endpoint.serve(
        user.path or "embedded", user.quant, gguf=kind_takes(user.kind, "file"), **limits
    )


def _agent_sampling(model: ModelSpec) -> dict[str, Any]:
    s = model.sampling
    out: dict[str, Any] = {"temperature": s.temperature, "max_tokens": s.max_tokens}
    if s.top_p < 1.0:
        out["top_p"] = s.top_p
    return out


def _user_sampling(user: Tau2UserSpec) -> dict[str, Any]:
    sampling: dict[str, Any] = {"temperature": user.temperature, **user.llm_args}
    if user.max_tokens is not None:
        sampling["max_tokens"] = user.max_tokens
    return sampling


def recipe(study: Study, model: ModelSpec, arm: str, index: int) -> Tau2Recipe:
    """The τ² part of one job of `model` in `arm`."""
    spec = tau2_spec(study)
    limits = {"timeout_s": spec.request_timeout_s, "max_retries": spec.max_retries}
    return Tau2Recipe(
        agent=_agent_endpoint(model, arm, limits),
        agent_sampling=_agent_sampling(model),
        user=_user_endpoint(spec.user, limits),
        user_sampling=_user_sampling(spec.user),
        task_split=spec.task_split,
        index=index,
        log_file=str(study.output_dir / LOG_FILE),
    )
