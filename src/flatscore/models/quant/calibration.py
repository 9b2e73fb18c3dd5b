"""Where AWQ's calibration transcripts (and the held-out evaluation transcripts) come from.

Pluggable: a `CalibrationSource` is any callable returning conversations (messages + tool
schemas). The default is a small bundled set of agent-style retail/telecom transcripts;
once the built-in domains exist, a source built from their oracle episodes can replace it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib import resources
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from flatscore.episode import Message


class Conversation(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    split: Literal["calibration", "heldout"]
    tools: list[dict[str, Any]]
    messages: list[Message]


CalibrationSource = Callable[[], list[Conversation]]


def bundled(split: Literal["calibration", "heldout"] | None = None) -> list[Conversation]:
    """The bundled transcripts (`split`: calibration for AWQ, heldout for evaluation)."""
    text = resources.files("flatscore.models.quant").joinpath("data/transcripts.json").read_text()
    raw = json.loads(text)
    tools = raw["tools"]
    out = [
        Conversation(id=c["id"], split=c["split"], tools=tools[c["tools"]], messages=c["messages"])
        for c in raw["conversations"]
    ]
    return [c for c in out if split is None or c.split == split]


def bundled_calibration() -> list[Conversation]:
    return bundled("calibration")


def token_sequences(tokenizer: Any, conversations: list[Conversation]) -> list[list[int]]:
    """Render each conversation in the local chat format and tokenize it."""
    from flatscore.models.chat_format import encode_conversation, render

    return [
        list(
            encode_conversation(
                tokenizer, render(c.messages, c.tools, add_generation_prompt=False).text
            )["input_ids"]
        )
        for c in conversations
    ]
