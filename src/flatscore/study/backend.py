"""How a model is reached, as data: an endpoint's settings, the decoding settings a person
chooses, and one model in one precision (`BackendSpec`). The kinds they name are checked
against the registries where a study is loaded (`flatscore.run.checks`) and where a
backend is built (`flatscore.models.shared.get_backend`), not here."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from flatscore import defaults
from flatscore.strict import StrictModel
from flatscore.study.server import ServedBy, ServerSpec


class Endpoint(StrictModel):
    """How requests reach an OpenAI-compatible endpoint: the one model of these settings,
    which a study's model (`ModelSpec`), a backend (`BackendSpec`), this backend's config
    and τ²'s endpoints (`Tau2Endpoint`) all extend. `api_key_env` names the variable
    holding the key (None: no key)."""

    api_key_env: str | None = None
    timeout_s: float = Field(defaults.ENDPOINT_TIMEOUT_S, gt=0)
    max_retries: int = Field(defaults.ENDPOINT_RETRIES, ge=0)
    endpoint_concurrency: int = Field(defaults.ENDPOINT_CONCURRENCY, ge=1)


class SamplingSpec(BaseModel):
    """The decoding settings a study file gives (a model's, shared by every arm on purpose;
    an LLM user simulator's): the part of `Sampling` a person chooses."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    temperature: float = Field(defaults.TEMPERATURE, ge=0.0)
    top_p: float = Field(defaults.TOP_P, gt=0.0, le=1.0)
    max_tokens: int = Field(defaults.MAX_TOKENS, ge=1)


class BackendSpec(Endpoint):
    """How to reach one model in one precision: in-process or over HTTP. Frozen, hence
    hashable: a worker process loads each distinct backend once (`get_backend`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str = Field(description="a registered backend (`BACKENDS`, `register_backend`)")
    path: str = "embedded"
    adapter: str | None = Field(
        None, description="embedded/local: a LoRA adapter directory merged into the weights"
    )
    quant: str = "ref"
    url: str | None = None
    served_model: str | None = None
    cache_path: str | None = None
    threads: int = Field(1, ge=1)
    compute: str = Field("fp32", description="a registered compute setting (`COMPUTES`)")
    kv_memory_mb: float | None = Field(defaults.KV_MEMORY_MB, gt=0)
    max_batch: int = Field(
        defaults.MAX_BATCH, ge=1, description="local: sequences one engine decodes together"
    )
    batch_invariant: bool = True
    private_prefix: bool | None = Field(
        None,
        description="local: each sequence copies the shared system turn into its own cache "
        "once per turn instead of joining it in every layer of every step (the same numbers, "
        "~1.17x faster padded decode steps, more KV memory); None: only when unpadded",
    )
    instance: str | None = Field(
        None,
        description="a label only: specs equal but for it load separate copies (an arm "
        "that shares weights with another gets an engine of its own: "
        "ModelSpec.engine_per_arm)",
    )
    server: ServerSpec | None = Field(
        None, description="openai: a server flatscore starts for this arm (then `url`)"
    )
    served_by: ServedBy | None = Field(
        None, description="openai: that server once started (its URL, version, command)"
    )
