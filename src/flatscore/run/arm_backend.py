"""The backend that plays one arm of a study's model: how its weights or endpoint are reached,
from the model's settings and its kind's registered study fields (`kind_takes`)."""

from __future__ import annotations

from pathlib import Path

from flatscore import defaults
from flatscore.models.shared import kind_takes
from flatscore.study import AGENT_KIND, BackendSpec, Endpoint, ModelSpec


def arm_backend(model: ModelSpec, arm: str, out_dir: Path | None = None) -> BackendSpec | None:
    """The backend of one arm (None for kind `agent`); a control arm gets the backend of
    the arm it replicates (its own response cache, so it never replays that arm's), an
    inject arm its base's (the same loaded model and response cache)."""
    spec = model.arms[model.played_by(arm)]
    if model.kind == AGENT_KIND:
        return None
    if kind_takes(model.kind, "url"):  # a server reached over HTTP
        cache = None
        if model.cache and out_dir is not None:
            cache = str(out_dir / "cache" / f"{model.name}__{arm}.sqlite")
        endpoint = model.model_dump(include=set(Endpoint.model_fields))
        server = model.server_of(arm)  # None: a server that is already up at `url`
        return BackendSpec(
            **{**endpoint, "api_key_env": spec.api_key_env or model.api_key_env},
            kind=model.kind,
            url=spec.url,
            served_model=spec.served_model or (model.name if server else None),
            cache_path=cache,
            server=server,
        )
    if kind_takes(model.kind, "file"):  # an arm may be a file of its own
        return BackendSpec(
            kind=model.kind,
            path=spec.file or model.path or "embedded",
            quant="ref" if spec.file else spec.quant or model.played_by(arm),
            threads=model.threads,
            kv_memory_mb=model.kv_memory_mb,
        )
    # Arms played by the same weights (a control, an inject arm and their base) share
    # one loaded model and so one engine: it gets room for each of them (sequences in
    # a pass, KV memory), as if each had its own; else they queue behind one arm's
    # share and the whole study waits for that engine. `engine_per_arm`: a copy each.
    sharing = (
        1
        if model.engine_per_arm
        else sum(model.played_by(a) == model.played_by(arm) for a in model.arms)
    )
    return BackendSpec(
        kind=model.kind,
        path=model.path or "embedded",
        adapter=model.adapter,
        quant=spec.quant or model.played_by(arm),
        threads=model.threads,
        compute=model.compute or "fp32",
        kv_memory_mb=model.kv_memory_mb * sharing,
        max_batch=defaults.MAX_BATCH * sharing,
        # None (the engine's default) unless asked: specs of studies without it stay
        # as they were, and so do their cached backends.
        private_prefix=True if model.private_prefix else None,
        instance=arm if model.engine_per_arm else None,
    )
