"""User simulators: the interface (`base`), `scripted` and `llm` (needs a backend)."""

from __future__ import annotations

from flatscore.users.base import (
    STOP,
    STOP_TOKENS,
    User,
    is_stop,
    make_user,
    register_user,
    user_names,
)
from flatscore.users.llm import LLMUser
from flatscore.users.scripted import ScriptedUser

register_user("scripted", ScriptedUser)
register_user("llm", LLMUser)

__all__ = [
    "STOP",
    "STOP_TOKENS",
    "LLMUser",
    "ScriptedUser",
    "User",
    "is_stop",
    "make_user",
    "register_user",
    "user_names",
]
