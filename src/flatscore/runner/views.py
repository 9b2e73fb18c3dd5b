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


def agent_view(messages: list[Message], policy: str) -> list[Message]:
    view = [Message(role="system", content=policy)]
    for m in messages:
        if m.role == "user":
            if m.tool_calls:
                if m.content:
                    view.append(Message(role="user", content=m.content))
                continue
            view.append(m)
        elif m.role == "tool":
            if m.tool_result is not None and m.tool_result.requestor == "agent":
                view.append(m)
        elif m.role == "assistant":
            view.append(m)
    return view


def user_view(messages: list[Message]) -> list[Message]:
    view = []
    for m in messages:
        if m.role == "assistant":
            if m.malformed:
                view.append(Message(role="assistant", content=m.content or "", malformed=True))
            elif not m.tool_calls:
                view.append(m)
        elif m.role == "tool":
            if m.tool_result is not None and m.tool_result.requestor == "user":
                view.append(m)
        elif m.role == "user":
            view.append(m)
    return view
