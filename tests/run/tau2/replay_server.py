"""The endpoint the live τ² tests run against: `tests/scripted_endpoint.py` with its τ²
scripts (it says how a script is picked and stepped; every tool call gets a fresh id).

In-process: `with ReplayServer(delay_s=0.05) as s: s.url`. As a process (for kill tests):
`python replay_server.py PORT [DELAY_S]` prints `ready` once listening.
"""

from __future__ import annotations

import sys
from pathlib import Path

# tests/ holds the scripted endpoint; put it on the path when this file runs as a process
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scripted_endpoint import TAU2_SCRIPTS, ScriptedEndpoint, serve_forever


class ReplayServer(ScriptedEndpoint):
    """The endpoint with `TAU2_SCRIPTS` (`requests`, `model_seconds`: see `ScriptedEndpoint`)."""

    def __init__(self, delay_s: float = 0.0, port: int = 0) -> None:
        super().__init__(TAU2_SCRIPTS, delay_s=delay_s, port=port)


if __name__ == "__main__":
    serve_forever(
        TAU2_SCRIPTS, int(sys.argv[1]), delay_s=float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
    )
