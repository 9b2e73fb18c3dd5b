"""A server flatscore starts, in words: the line a run prints as it starts one
(`models.servers.ServerPool` calls back with the arm and its spec; the run says it)."""

from __future__ import annotations

from flatscore.study.server import ServerSpec


def starting_line(arm: str, spec: ServerSpec) -> str:
    """ "starting the llama-cpp server for m/q4 (model.gguf)"."""
    return f"starting the {spec.kind} server for {arm} ({spec.weights})"
