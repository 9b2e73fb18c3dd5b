"""What each side of a conversation sees. One episode transcript, two views.

- The **agent** sees the policy (as a system message), the user's text turns, its own turns
  and its own tool results — never the user's device calls or their results (τ² does the
  same).
- The **user** sees the agent's text turns (malformed agent output included, as text), its
  own turns and its own tool results — never the agent's tool calls or their results.

System messages in the transcript (repair instructions logged by middleware) are in neither
view: the middleware shows them to its agent itself. Training code (the embedded model)
builds its prompts with `agent_view` too.
"""

from __future__ import annotations

from flatscore.episode import Message


def _own_result(m: Message, side: str) -> bool:
    return m.tool_result is not None and m.tool_result.requestor == side


def _for_agent(m: Message) -> Message | None:
    """The agent's copy of one message (None: hidden from it)."""
    if m.role == "user" and m.tool_calls:  # a device action: at most its words are heard
        return Message(role="user", content=m.content) if m.content else None
    if m.role == "tool":
        return m if _own_result(m, "agent") else None
    return m if m.role in ("user", "assistant") else None


def _for_user(m: Message) -> Message | None:
    """The user's copy of one message (None: hidden from them)."""
    if m.role == "assistant" and m.malformed:  # delivered as the text it was
        return Message(role="assistant", content=m.content or "", malformed=True)
    if m.role == "assistant":
        return None if m.tool_calls else m
    if m.role == "tool":
        return m if _own_result(m, "user") else None
    return m if m.role == "user" else None


def agent_view(messages: list[Message], policy: str) -> list[Message]:
    """The policy as a system message, then what the agent may see of the transcript."""
    seen = [v for m in messages if (v := _for_agent(m)) is not None]
    return [Message(role="system", content=policy), *seen]


def user_view(messages: list[Message]) -> list[Message]:
    """What the user may see of the transcript."""
    return [v for m in messages if (v := _for_user(m)) is not None]
