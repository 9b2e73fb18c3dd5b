"""`flatscore serve`: an OpenAI-compatible endpoint over one model in one arm: the local
backend (torch, in-process precision formats) or a GGUF file run by llama.cpp (`--kind gguf`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from flatscore.cli.app import app, err_console
from flatscore.errors import InputError

if TYPE_CHECKING:
    from flatscore.models.local import LocalBackend


@app.command()
def serve(
    model: str = typer.Option("embedded", help="'embedded', a .gguf file or a model dir."),
    arm: str = typer.Option("ref", help="Precision arm (see docs/arms.md)."),
    kind: str = typer.Option(
        "local",
        help="local (also: embedded): torch, the arm a format applied in-process; gguf: "
        "llama.cpp, the arm a GGUF file (ref, or a llama.cpp type made from MODEL: Q8_0 ...).",
    ),
    host: str = typer.Option("127.0.0.1", help="Interface to bind (loopback by default)."),
    port: int = typer.Option(8000, help="TCP port."),
    name: str | None = typer.Option(None, help="Model id to report (default: MODEL@ARM)."),
    threads: int | None = typer.Option(
        None, help="CPU threads: torch's (default: torch's), or llama.cpp's (default 1)."
    ),
    compute: str = typer.Option(
        "fp32",
        help="fp32, bf16 linear layers (faster on CPUs with AMX) or fp16 (one client with "
        "--no-batch-invariant: ~2x faster decoding; docs/backends.md).",
    ),
    batch_invariant: bool = typer.Option(
        True,
        help="Pad every pass to 16 rows so a request's tokens never depend on the others "
        "in flight; --no-batch-invariant: a single client's requests run several times "
        "faster, their numbers then depend on what runs beside them (docs/backends.md).",
    ),
    api_key: str | None = typer.Option(
        None,
        envvar="FLATSCORE_SERVE_API_KEY",
        show_envvar=True,
        help="Require `Authorization: Bearer KEY` on every request.",
    ),
) -> None:
    """Serve a local model in one precision arm at /v1/chat/completions (torch, or
    llama.cpp with --kind gguf).

    Only loopback clients are served, browsers' cross-site requests are refused, and bodies
    over 4 MiB are rejected (see docs/backends.md)."""
    import uvicorn

    from flatscore.models.base import COMPUTES, Backend
    from flatscore.serve.app import create_app
    from flatscore.serve.guard import GuardConfig
    from flatscore.store.redaction import register_secret

    kinds = serve_kinds()
    if kind not in kinds:
        raise InputError(f"{kind!r}: use {' or '.join(kinds)}", field="--kind")
    if compute not in COMPUTES:
        raise InputError(f"{compute!r}: use {' or '.join(COMPUTES.names())}", field="--compute")
    backend: Backend
    if kind == "gguf":
        if compute != "fp32":
            raise InputError("applies to --kind local only (llama.cpp computes)", field="--compute")
        from flatscore.models.gguf import SERVE_CONTEXT, GgufBackend

        backend = GgufBackend.from_spec(model, arm, threads=threads or 1, max_context=SERVE_CONTEXT)
        served = name or f"gguf:{Path(model).name or model}@{arm}"
        what = f"{backend.loaded.description}; {threads or 1} llama.cpp threads"
    else:
        backend = _local_backend(model, arm, threads, compute, batch_invariant)
        served = name or f"{backend.loaded.name}@{arm}"
        what = f"{backend.loaded.description}; arm {arm}; {compute} compute"
    err_console.print(f"serving {served} ({what}) at http://{host}:{port}/v1")
    register_secret(api_key)
    guard = GuardConfig(bind_host=host, api_key=api_key or None)
    if not guard.loopback_only and guard.api_key is None:
        err_console.print(
            f"warning: {host} is not a loopback address and no --api-key is set: anyone who "
            "can reach it can use the model",
            style="yellow",
        )
    uvicorn.run(create_app(backend, served, guard), host=host, port=port, log_level="warning")


def serve_kinds() -> list[str]:
    """The backend kinds `serve` runs, from their registry: those whose models are weights
    on this machine (they take a `path`); `embedded` is `local` with the bundled model, `gguf`
    is llama.cpp, and every other is served by torch."""
    from flatscore.models.shared import kinds_taking

    return kinds_taking("path")


def _local_backend(
    model: str, arm: str, threads: int | None, compute: str, batch_invariant: bool
) -> LocalBackend:
    import torch

    from flatscore.models.local import LocalBackend

    if threads:
        torch.set_num_threads(threads)
    return LocalBackend.from_spec(model, arm, compute=compute, batch_invariant=batch_invariant)
