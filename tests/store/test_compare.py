"""flatscore.store.compare: archived episodes of study v2 against "live" copies of them —
identical copies reproduce, and a planted change (one token of one message, one tool
argument, a lost message, an outcome) is named at its episode, turn and character."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flatscore.episode import Episode
from flatscore.errors import InputError
from flatscore.report.reproduction import reproduction_headline
from flatscore.store.compare import compare, reproduce
from v2_archive import small_archive, v2_line

PICKS = [
    ("ref", "retail", "status_00", 0),
    ("ref-planted", "retail", "address_00", 0),
    ("int4-awq", "telecom", "sim_05", 0),
]


def _episode(pick: tuple[str, str, str, int]) -> Episode:
    return Episode.model_validate_json(v2_line(*pick))


def _first_text_turn(ep: Episode, role: str = "assistant") -> int:
    return next(i for i, m in enumerate(ep.messages) if m.role == role and m.content and i > 0)


def test_identical_copies_reproduce(tmp_path: Path) -> None:
    archive = small_archive(tmp_path / "a", PICKS)
    live = [_episode(p) for p in PICKS]
    # what depends on the machine is not compared: timings, latencies, the serving process
    live[0] = live[0].model_copy(
        update={
            "timing": live[0].timing.model_copy(update={"duration_s": 1.0}),
            "messages": [m.model_copy(update={"latency_s": 0.5}) for m in live[0].messages],
        }
    )
    result = reproduce(live, archive)
    assert result.exact and (result.checked, result.identical) == (3, 3)
    assert result.first_divergence is None and not result.not_archived
    assert reproduction_headline(result) == "3 of 3 episodes reproduced exactly on this machine"


def test_a_changed_token_is_named_at_its_turn_and_character(tmp_path: Path) -> None:
    target = _episode(PICKS[1])
    turn = _first_text_turn(target)
    text = target.messages[turn].content or ""
    word = text.split()[2]
    at = text.index(word)
    changed = text[:at] + "XYZ" + text[at + len(word) :]
    data = json.loads(v2_line(*PICKS[1]))
    data["messages"][turn]["content"] = changed
    archive = small_archive(tmp_path / "a", PICKS, edit={1: json.dumps(data)})
    result = reproduce([_episode(p) for p in PICKS], archive)
    assert (result.checked, result.identical) == (3, 2) and not result.exact
    div = result.first_divergence
    assert div is not None
    assert (div.episode_id, div.arm, div.task_id, div.turn) == (
        target.episode_id,
        "ref-planted",
        "address_00",
        turn,
    )
    assert div.field == "text" and div.position == at
    assert "XYZ" in div.archived and word in div.live
    line = reproduction_headline(result)
    assert line.startswith("2 of 3 episodes reproduced exactly on this machine; the first")
    assert f"turn {turn}" in line and target.episode_id in line


def test_a_changed_tool_argument_lost_message_and_outcome() -> None:
    ep = _episode(PICKS[2])
    turn = next(i for i, m in enumerate(ep.messages) if m.tool_calls)
    call = ep.messages[turn].tool_calls[0]
    assert isinstance(call.arguments, dict)
    other = {**call.arguments, "x": 1}
    msgs = list(ep.messages)
    msgs[turn] = msgs[turn].model_copy(
        update={"tool_calls": [call.model_copy(update={"arguments": other})]}
    )
    div = compare(ep, ep.model_copy(update={"messages": msgs}))
    assert div is not None and (div.turn, div.field) == (turn, "text")
    assert div.position is not None and '"x": 1' in div.live
    short = compare(ep, ep.model_copy(update={"messages": ep.messages[:-1]}))
    assert short is not None and (short.turn, short.field) == (len(ep.messages) - 1, "message")
    assert short.live == "(no message)"
    reward = compare(ep, ep.model_copy(update={"reward": 1.0 - (ep.reward or 0.0)}))
    assert reward is not None and (reward.turn, reward.field) == (None, "reward")
    assert compare(ep, ep) is None


def test_a_live_episode_the_archive_lacks_is_not_reproduced(tmp_path: Path) -> None:
    archive = small_archive(tmp_path / "a", PICKS[:2])
    result = reproduce([_episode(p) for p in PICKS], archive)
    assert (result.checked, result.identical) == (3, 2)
    assert result.not_archived == [_episode(PICKS[2]).episode_id]
    assert "1 not in the archive" in reproduction_headline(result)
    with pytest.raises(InputError, match="no live episodes"):
        reproduce([], archive)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_the_first_differing_character_is_found(data: st.DataObject) -> None:
    """Property: any one-character change of an assistant message's text is reported at
    that turn and character, with the changed character in the live excerpt."""
    ep = _episode(PICKS[0])
    turn = _first_text_turn(ep)
    text = ep.messages[turn].content or ""
    at = data.draw(st.integers(0, len(text) - 1))
    new = data.draw(st.characters(codec="utf-8").filter(lambda c: c != text[at]))
    msgs = list(ep.messages)
    msgs[turn] = msgs[turn].model_copy(update={"content": text[:at] + new + text[at + 1 :]})
    div = compare(ep, ep.model_copy(update={"messages": msgs}))
    assert div is not None and (div.turn, div.field, div.position) == (turn, "text", at)
    assert new in div.live
