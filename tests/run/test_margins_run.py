"""The margins run: transcripts as the agent saw them, and one real oracle episode
teacher-forced through the embedded model's int8 and int4 arms (slow: loads the model)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli_runner import flatscore
from flatscore.agents import make_agent
from flatscore.analysis.margins_result import MarginsResult
from flatscore.cli import app
from flatscore.domains import get_domain
from flatscore.episode import Episode, Message
from flatscore.run.episode_loop import EpisodeSpec, run_episode
from flatscore.run.margins import agent_messages
from flatscore.store.jsonl import EpisodeWriter
from flatscore.users import make_user


def oracle_episode(task_id: str = "cancel_00") -> Episode:
    d = get_domain("retail")
    spec = EpisodeSpec(domain=d, task=d.task(task_id), trial=0, seed=300, arm="bf16")
    return asyncio.run(run_episode(spec, make_agent("oracle"), make_user("scripted")))


def test_agent_messages_keep_repair_instructions_in_place() -> None:
    ep = oracle_episode()
    i = next(i for i, m in enumerate(ep.messages) if m.role == "tool")
    note = Message(role="system", content="Repair (attempt 1 of 3)", repair=True)
    with_note = ep.model_copy(
        update={"messages": [*ep.messages[: i + 1], note, *ep.messages[i + 1 :]]}
    )
    plain = agent_messages(ep, "policy")
    view = agent_messages(with_note, "policy")
    assert view[0] == Message(role="system", content="policy")
    at = view.index(note)
    assert view[:at] + view[at + 1 :] == plain
    assert view[at - 1].role == "tool"
    assert not any(m.role == "user" and m.tool_calls for m in view)


@pytest.mark.slow
def test_margins_end_to_end_on_one_oracle_episode(tmp_path: Path) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    run = tmp_path / "run.jsonl"
    with EpisodeWriter(run) as writer:
        writer.write(oracle_episode())
    out = tmp_path / "margins.json"
    result = CliRunner().invoke(
        app,
        [
            "margins",
            str(run),
            "--arms",
            "int8,int4,vllm=http://127.0.0.1:9/v1",
            "--out",
            str(out),
            "--no-progress",
        ],
    )
    assert result.exit_code == 0, result.output
    m = MarginsResult.model_validate(json.loads(out.read_text()))
    assert m.transcripts_arm == "bf16" and m.reference_arm == "ref" and len(m.episodes) == 1
    assert [a.arm for a in m.arms] == ["int8", "int4"]
    assert [u.arm for u in m.unavailable] == ["vllm"]
    # cancel_00 makes three calls; each name spans at least one token
    assert m.agent_tokens > 100 and 3 <= m.decision_tokens < 40
    assert m.reference_decision_margins.count == m.decision_tokens
    int8, int4 = m.arms
    for a in m.arms:
        assert sum(b.tokens for b in a.flip_by_margin) == m.agent_tokens
        assert sum(b.flips for b in a.flip_by_margin) == a.flips
        assert a.decision_flips == len(a.flipped_decisions)
        for fd in a.flipped_decisions:
            assert fd.reference_name in ("find_user_by_email", "get_order", "cancel_order")
            assert fd.arm_token != fd.ref_token
    # int8 moves fewer decisions than int4, and only near-ties
    assert int8.flips < int4.flips
    assert int8.flipped_margin_max is None or int8.flipped_margin_max < 1.0
    assert "int8" in result.output and "[0, 0.1)" in result.output
    # analyze --margins attaches the result to analysis.json
    analysis = tmp_path / "analysis.json"
    attached = CliRunner().invoke(
        app, ["analyze", str(run), "--margins", str(out), "--json", str(analysis)]
    )
    assert attached.exit_code == 0, attached.output
    assert json.loads(analysis.read_text())["margins"] == json.loads(out.read_text())


def test_load_margins_names_the_file_and_field(tmp_path: Path) -> None:
    from flatscore.analysis.margins_result import load_margins
    from flatscore.errors import InputError

    bad = tmp_path / "m.json"
    bad.write_text(json.dumps({"model": "x"}))
    with pytest.raises(InputError) as err:
        load_margins(bad)
    assert str(bad) in err.value.one_line() and "field" in err.value.one_line()


@pytest.mark.slow
def test_decision_tokens_spell_the_tool_names() -> None:
    from flatscore.models.embedded import load_model
    from flatscore.models.local import LocalBackend
    from flatscore.run.margins import prepare

    backend = LocalBackend(load_model("embedded"))
    ep = oracle_episode()
    forced = prepare(backend, ep)
    assert len(forced.targets) == len(forced.decision) == len(forced.names)
    assert all(forced.ids[t] is not None for t in forced.targets)
    spelled: dict[tuple[int, str], str] = {}
    for t, info in zip(forced.targets, forced.names, strict=True):
        if info is not None:
            key = (info[0], info[1])
            spelled[key] = spelled.get(key, "") + backend.tokenizer.decode([forced.ids[t]])
    names = [name for _, name in sorted(spelled)]
    assert names == ["find_user_by_email", "get_order", "cancel_order"]
    for (_, name), text in spelled.items():
        assert name in text and len(text) <= len(name) + 3  # at most a quote/space around it


def test_the_reference_logits_old_spelling_is_accepted_with_a_warning(tmp_path: Path) -> None:
    """`--reference` was margins' reference precision; it is `--reference-logits` now (every
    other command's `--reference` is an arm of the runs). A missing run stops it early."""
    args = ("margins", tmp_path / "nope.jsonl", "--arms", "int8", "--out", tmp_path / "m.json")
    old = flatscore(*args, "--reference", "ref")
    new = flatscore(*args, "--reference-logits", "ref")
    assert old.returncode == new.returncode == 2 and "run not found" in old.stderr
    assert "--reference is now --reference-logits" in old.stderr and "is now" not in new.stderr
