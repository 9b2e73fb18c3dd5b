"""`flatscore serve`: an OpenAI-compatible endpoint over the local backend and one arm."""

from __future__ import annotations

from typing import cast

import typer

from flatscore.cli.app import app, err_console
from flatscore.errors import InputError


@app.command()
def serve(
    model: str = typer.Option("embedded", help="'embedded', a .gguf file or a model dir."),
    arm: str = typer.Option("ref", help="Precision arm (see docs/arms.md)."),
    host: str = typer.Option("127.0.0.1", help="Interface to bind (loopback by default)."),
    port: int = typer.Option(8000, help="TCP port."),
    name: str | None = typer.Option(None, help="Model id to report (default: MODEL@ARM)."),
    threads: int | None = typer.Option(None, help="torch CPU threads (default: torch's)."),
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
    """Serve a local model in one precision arm at /v1/chat/completions.

    Only loopback clients are served, browsers' cross-site requests are refused, and bodies
    over 4 MiB are rejected (see docs/backends.md)."""
    import torch
    import uvicorn

    from flatscore.models.base import COMPUTES, Compute
    from flatscore.models.local import LocalBackend
    from flatscore.redaction import register_secret
    from flatscore.serve.app import create_app
    from flatscore.serve.guard import GuardConfig

    if compute not in COMPUTES:
        raise InputError(f"{compute!r}: use {' or '.join(COMPUTES)}", field="--compute")
    if threads:
        torch.set_num_threads(threads)
    backend = LocalBackend.from_spec(
        model, arm, compute=cast(Compute, compute), batch_invariant=batch_invariant
    )
    served = name or f"{backend.loaded.name}@{arm}"
    err_console.print(
        f"serving {served} ({backend.loaded.description}; arm {arm}; {compute} compute) "
        f"at http://{host}:{port}/v1"
    )
    register_secret(api_key)
    guard = GuardConfig(bind_host=host, api_key=api_key or None)
    if not guard.loopback_only and guard.api_key is None:
        err_console.print(
            f"warning: {host} is not a loopback address and no --api-key is set: anyone who "
            "can reach it can use the model",
            style="yellow",
        )
    uvicorn.run(create_app(backend, served, guard), host=host, port=port, log_level="warning")
