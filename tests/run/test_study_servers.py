"""flatscore.run.study_servers: a run says each server it starts, in the report's words
(`report.server_text`), before the server starts."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from flatscore.run.study_servers import StudyServers
from flatscore.study.server import ServerSpec


def test_a_starting_server_is_one_dim_line(tmp_path: Path) -> None:
    text = io.StringIO()
    servers = StudyServers(tmp_path, Console(file=text, width=200))
    assert servers.pool.on_start is not None
    servers.pool.on_start("smol/q4", ServerSpec(kind="llama-cpp", model="/m/q4.gguf"))
    assert text.getvalue() == "starting the llama-cpp server for smol/q4 (/m/q4.gguf)\n"
    assert StudyServers(tmp_path).pool.on_start is None  # no console, nothing said
