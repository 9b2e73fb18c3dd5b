"""One process-wide cache of loaded model backends, keyed by how to reach them.

Weights are big and loading is slow, and precision arms change weights in place, so each
distinct (model, arm) or endpoint is loaded once per process and shared by every agent and
user simulator that needs it: the study executors and the registry's model agent alike.
"""

from __future__ import annotations

import atexit
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, NamedTuple

from flatscore.models.arm_checks import check_gguf_arms, check_torch_arms
from flatscore.models.backends import BACKENDS
from flatscore.models.openai import OpenAIBackend, OpenAIConfig
from flatscore.study.backend import BackendSpec, Endpoint

if TYPE_CHECKING:
    from flatscore.models.base import Backend
    from flatscore.study import ModelSpec

ArmCheck = Callable[["ModelSpec", int, "str | None"], None]
"""A kind's check of a study model's arms (`models[i]` of study `file`): raises InputError."""


def get_backend(spec: BackendSpec) -> Backend:
    """The backend for `spec`, loaded once per process (weights are big; arms change them
    in place, so each (model, arm) is its own copy): `BACKENDS` is the one cache. Loads run
    one at a time, but a slow load (AWQ calibration) does not hold up episodes of arms
    already loaded (`flatscore.registry`)."""
    return BACKENDS.make(spec.kind, spec=spec)


def clear_backends() -> None:
    """Drop every cached backend (frees model memory)."""
    for backend in BACKENDS.clear():
        backend.close()


# Engine threads are daemons: at exit (a Ctrl-C included) one still inside a forward pass
# aborts the process from torch's C++ ("terminate called without an active exception",
# exit -6) instead of exiting 130. Closing the backends first waits for the pass in
# progress (the engine stops between passes) and drops the waiting requests.
atexit.register(clear_backends)


_SAME_IN_OPENAI = {*Endpoint.model_fields, "cache_path"}
"""BackendSpec fields that OpenAIConfig shares: the endpoint's, and the response cache."""


def _openai(spec: BackendSpec) -> Backend:
    if spec.url is None and spec.server is not None:
        raise RuntimeError(f"the server of {spec.served_model} was not started")
    assert spec.url is not None and spec.served_model is not None  # validated by Study
    return OpenAIBackend(
        OpenAIConfig(
            base_url=spec.url,
            model=spec.served_model,
            served_by=spec.served_by,
            **spec.model_dump(include=_SAME_IN_OPENAI),
        )
    )


_SAME_IN_LOCAL = {
    "compute",
    "adapter",
    "kv_memory_mb",
    "max_batch",
    "batch_invariant",
    "private_prefix",
}
"""BackendSpec fields that `LocalBackend.from_spec` takes as they are."""


def _local(spec: BackendSpec) -> Backend:
    # torch and transformers are the optional `local` extra: imported only here.
    import torch

    # Resolve transformers' lazy names here, under the load lock, before any episode
    # thread generates: first resolutions racing in two threads can fail.
    from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache  # noqa: F401

    from flatscore.models.local import LocalBackend
    from flatscore.models.quant.recipes import is_recipe

    torch.set_num_threads(spec.threads)
    if is_recipe(spec.quant):  # an llm-compressor checkpoint (flatscore.models.compressed)
        from flatscore.models.compressed import from_spec

        return from_spec(
            spec.path, spec.quant, spec.quant, **spec.model_dump(include=_SAME_IN_LOCAL)
        )
    return LocalBackend.from_spec(
        spec.path, arm=spec.quant, **spec.model_dump(include=_SAME_IN_LOCAL)
    )


def _gguf(spec: BackendSpec) -> Backend:
    # llama-cpp-python is the optional `gguf` extra: imported only here.
    from flatscore.models.gguf import GgufBackend

    return GgufBackend.from_spec(
        spec.path, spec.quant, threads=spec.threads, kv_memory_mb=spec.kv_memory_mb
    )


class StudyFields(NamedTuple):
    """What a backend kind declares when registered (`register_backend`): the study fields
    (of a model or its arms) its models may give, those they must, and how their arms are
    checked."""

    takes: frozenset[str]
    needs: frozenset[str]
    check_arms: ArmCheck | None = None


def register_backend(
    kind: str,
    load: Callable[[BackendSpec], Backend],
    *,
    takes: Iterable[str] = (),
    needs: Iterable[str] = (),
    check_arms: ArmCheck | None = None,
) -> None:
    """Add a backend kind to `BACKENDS`, with the study fields (of a model or its arms:
    `path`, `quant`, `file`, `url`, `served_model`, `compute`) a model of this kind `takes`
    and those it `needs`: the study refuses the others, naming the kinds that take them
    (`kinds_taking`). `check_arms` checks a study model's arms (their formats or files
    exist); the study runs it. A kind registered on `BACKENDS` directly takes none of them
    and checks nothing."""
    fields = StudyFields(frozenset(takes) | frozenset(needs), frozenset(needs), check_arms)
    BACKENDS.register(kind, load, about=fields)


def _fields(kind: str) -> StudyFields:
    return BACKENDS.about(kind) or StudyFields(frozenset(), frozenset())


def arm_check(kind: str) -> ArmCheck | None:
    """The check `kind` registered for a study model's arms (None: it checks nothing)."""
    return _fields(kind).check_arms


def kinds_taking(field: str) -> list[str]:
    """The registered backend kinds whose models may give `field`, in the registry's order."""
    return [k for k in BACKENDS.names() if field in _fields(k).takes]


def kind_takes(kind: str, field: str) -> bool:
    """Whether a model of backend `kind` may give the study field `field`."""
    return field in _fields(kind).takes


def kind_needs(kind: str, field: str) -> bool:
    """Whether a model of backend `kind` must give the study field `field`."""
    return field in _fields(kind).needs


_IN_PROCESS = ("path", "adapter", "quant", "compute")
register_backend("openai", _openai, takes=["api_key_env", "server"], needs=["url", "served_model"])
register_backend("embedded", _local, takes=_IN_PROCESS, check_arms=check_torch_arms)
register_backend("local", _local, takes=_IN_PROCESS, needs=["path"], check_arms=check_torch_arms)
register_backend("gguf", _gguf, takes=["path", "quant", "file"], check_arms=check_gguf_arms)
