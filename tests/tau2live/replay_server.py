"""The scripts the live τ² tests replay through `flatscore.scripted_endpoint` (which says
how a script is picked and stepped; every tool call gets a fresh random id).

In-process: `with ReplayServer(delay_s=0.05) as s: s.url`. As a process (for kill tests):
`python replay_server.py PORT [DELAY_S]` prints `ready` once listening.
"""

from __future__ import annotations

import sys

from flatscore.scripted_endpoint import GREETING, ScriptedEndpoint, Step, serve_forever

SCRIPTS: dict[str, list[Step]] = {
    # Works in every τ² domain: in retail `toggle_roaming` is an unknown tool and the order
    # does not exist; in telecom the first is the *user's* tool (a role confusion) and the
    # second an unknown one. Two failed agent calls, one text answer, then the user stops.
    "live-agent": [
        GREETING,
        [("toggle_roaming", "{}")],
        [("get_order_details", '{"order_id": "#W0000000"}')],
        "I could not find that order. Is there anything else?",
        "Goodbye.",
    ],
    # A second arm that makes one failed call only.
    "live-agent-b": [
        GREETING,
        [("get_order_details", '{"order_id": "#W0000000"}')],
        "Sorry, that order does not exist.",
        "Goodbye.",
    ],
    "live-user": [
        "Hi, I need help with my order #W0000000.",
        "Thanks, that's all. ###STOP###",
    ],
    # Opens, then sends a tool call whose arguments are not JSON: τ²'s `generate` raises on
    # the user's turn (a crash on the user simulator's side, not the agent's).
    "garbled-user": [
        "Hi, I need help with my order #W0000000.",
        [("find_order", "{not json")],
    ],
    # Never stops: the episode ends at max_steps.
    "chatty-user": ["Tell me more."] * 200,
}


class ReplayServer(ScriptedEndpoint):
    """The endpoint with these scripts (see `ScriptedEndpoint` for `requests`, `model_seconds`)."""

    def __init__(self, delay_s: float = 0.0, port: int = 0) -> None:
        super().__init__(SCRIPTS, delay_s=delay_s, port=port)


if __name__ == "__main__":
    serve_forever(
        SCRIPTS, int(sys.argv[1]), delay_s=float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
    )
