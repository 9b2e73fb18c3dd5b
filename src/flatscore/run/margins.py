"""Teacher-force a run's episodes through every precision arm and measure logit margins.

The transcripts are one arm's episodes (by default the run's highest-precision arm), as the
agent saw them (`agent_view`: policy, user text, its own turns and tool results, repair
instructions where they were given), rendered in the local chat format with the domain's tool
schemas. Each arm then costs one forward pass per episode (`LocalBackend.teacher_force`,
logits kept only at agent-written positions). The reference logits come from the
`reference` precision arm (default `ref`, the weights as loaded); see
`flatscore.analysis.margins` for what is computed from them.

Only in-process arms of the local backend are measured. Endpoint arms (`name=URL`) are
listed under `unavailable`: the OpenAI-compatible chat API returns logprobs of generated
tokens only, and flatscore does not yet call vLLM's `prompt_logprobs` extension.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from flatscore.analysis.margins import (
    DEFAULT_EDGES,
    FlippedDecision,
    TokenMargins,
    arm_against,
    classify_alternative,
    concat,
    margin_distribution,
    reference_top2,
    summarize_arm,
)
from flatscore.analysis.margins_result import MarginsResult, Unavailable
from flatscore.episode import Episode, Message
from flatscore.errors import InputError
from flatscore.report.margins_text import margins_notes


@dataclass
class Forced:
    """One episode ready to teacher-force: token ids, the agent positions (targets) and, per
    target, whether it is a decision token, with its name context."""

    episode_id: str
    ids: list[int]
    targets: list[int]
    decision: np.ndarray
    names: list[tuple[int, str, int, str] | None]  # (message index, name, offset, text before)
    agent_tools: list[str]
    user_tools: list[str]


# ---------------------------------------------------------------- transcripts


def _tools_for(episode: Episode) -> tuple[list[dict[str, Any]], str]:
    """The agent's tool schemas and policy: the built-in domain's, else name-only schemas."""
    from flatscore.domains import get_domain

    try:
        domain = get_domain(episode.domain)
    except Exception:
        schemas = [
            {"type": "function", "function": {"name": n, "description": "", "parameters": {}}}
            for n in episode.tools.agent
        ]
        return schemas, ""
    return domain.agent_tool_schemas(), domain.policy


def agent_messages(episode: Episode, policy: str) -> list[Message]:
    """The agent's view of the whole episode, repair instructions included where given
    (`agent_view` filters message by message, so it can be applied one message at a time)."""
    from flatscore.run.views import agent_view

    view = agent_view([], policy)
    for m in episode.messages:
        view += [m] if m.repair else agent_view([m], policy)[1:]
    return view


def _name_spans(view: list[Message], rendered: Any) -> list[tuple[int, int, int, str]]:
    """(start, end, message index, name) of every tool name the agent wrote, in characters."""
    from flatscore.models.chat_format import CALL_OPEN, render_assistant_body, render_call

    spans = []
    for span in rendered.agent_spans:
        message = view[span.message_index]
        body = render_assistant_body(message)
        cursor = 0
        for call in message.tool_calls:
            text = render_call(call)
            at = body.find(text, cursor)
            if at < 0:
                continue
            cursor = at + len(text)
            start = span.start + at + len(CALL_OPEN) + len('{"name": "')
            spans.append(
                (start, start + len(json.dumps(call.name)) - 2, span.message_index, call.name)
            )
    return spans


def prepare(backend: Any, episode: Episode) -> Forced:
    """Tokenize one episode's agent view and mark its agent and decision tokens."""
    from flatscore.models.chat_format import encode_conversation, render

    tools, policy = _tools_for(episode)
    view = agent_messages(episode, policy)
    transcript = backend.transcript(view, tools)
    rendered = render(view, tools, add_generation_prompt=False)
    enc = encode_conversation(backend.tokenizer, rendered.text, offsets=True)
    if list(enc["input_ids"]) != transcript.ids:
        raise RuntimeError("tokenization differs between transcript() and the offsets pass")
    spans = _name_spans(view, rendered)
    targets = [i for i in range(1, len(transcript.ids)) if transcript.agent_mask[i]]
    names: list[tuple[int, str, int, str] | None] = []
    seen: dict[int, int] = {}
    for i in targets:
        s, e = enc["offset_mapping"][i]
        hit = None
        for j, (ns, ne, mi, name) in enumerate(spans):
            if s < ne and e > ns:
                offset = seen.get(j, 0)
                seen[j] = offset + 1
                hit = (mi, name, offset, rendered.text[ns : max(ns, s)])
                break
        names.append(hit)
    return Forced(
        episode_id=episode.episode_id,
        ids=transcript.ids,
        targets=targets,
        decision=np.array([n is not None for n in names], dtype=bool),
        names=names,
        agent_tools=[t["function"]["name"] for t in tools],
        user_tools=list(episode.tools.user),
    )


# ---------------------------------------------------------------- the run


def select_episodes(
    episodes: Iterable[Episode],
    transcripts_arm: str | None,
    limit: int | None = None,
    episode_ids: Sequence[str] | None = None,
) -> tuple[str, list[Episode], set[str]]:
    """(arm used, its episodes in a fixed order, names hallucinated anywhere in the run)."""
    from flatscore.analysis.channels import load_rules
    from flatscore.analysis.facts import episode_facts
    from flatscore.analysis.precision import choose_reference

    rules = load_rules()
    by_arm: dict[str, list[Episode]] = {}
    hallucinated: set[str] = set()
    for ep in episodes:
        if ep.is_infrastructure_error:
            continue
        by_arm.setdefault(ep.arm, []).append(ep)
        hallucinated.update(episode_facts(ep, rules).hallucinated)
    if not by_arm:
        raise InputError("no usable episodes in the run")
    if transcripts_arm is None:
        transcripts_arm, _ = choose_reference(by_arm)
    elif transcripts_arm not in by_arm:
        raise InputError(
            f"arm {transcripts_arm!r} is not in the run (arms: {', '.join(sorted(by_arm))})",
            field="--from-arm",
        )
    chosen = sorted(
        by_arm[transcripts_arm], key=lambda e: (e.domain, e.task_id, e.trial, e.episode_id)
    )
    if episode_ids:
        chosen = [e for e in chosen if e.episode_id in set(episode_ids)]
        if not chosen:
            raise InputError("none of the episode ids is in the chosen arm", field="--episode")
    if limit is not None:
        chosen = chosen[:limit]
    return transcripts_arm, chosen, hallucinated


def _flipped_decisions(
    forced: Forced, margins: TokenMargins, decode: Any, hallucinated: set[str], cap: int
) -> list[FlippedDecision]:
    out = []
    for row in np.flatnonzero(forced.decision & margins.flipped)[:cap]:
        info = forced.names[row]
        assert info is not None
        mi, name, offset, before = info
        arm_token = decode([int(margins.arm_top1[row])])
        out.append(
            FlippedDecision(
                episode_id=forced.episode_id,
                message_index=mi,
                reference_name=name,
                name_offset=offset,
                ref_token=decode([int(margins.ref_top1[row])]),
                arm_token=arm_token,
                ref_margin=float(margins.ref_margin[row]),
                arm_gap=float(margins.arm_gap[row]),
                alternative=classify_alternative(
                    before + arm_token, forced.agent_tools, forced.user_tools, hallucinated
                ),
            )
        )
    return out


def run_margins(
    runs: Sequence[str | Path],
    arms: Sequence[str],
    *,
    model: str = "embedded",
    reference: str = "ref",
    transcripts_arm: str | None = None,
    limit: int | None = None,
    episode_ids: Sequence[str] | None = None,
    edges: Sequence[float] = DEFAULT_EDGES,
    max_flipped: int = 500,
    progress: bool = True,
) -> MarginsResult:
    """Margins and flips of every in-process arm against `reference` on one arm's episodes."""
    import torch
    from rich.console import Console
    from rich.progress import Progress

    from flatscore.formats import load_runs
    from flatscore.models.embedded import load_model
    from flatscore.models.local import LocalBackend
    from flatscore.models.quant.arms import ARMS, apply_arm, quantizable_linears
    from flatscore.models.quant.calibration import bundled_calibration, token_sequences

    local = [a for a in arms if "=" not in a]
    unavailable = [
        Unavailable(
            arm=a.split("=", 1)[0],
            reason="endpoint arm: prompt logprobs are not available through the "
            "OpenAI-compatible chat API, and vLLM's prompt_logprobs extension is not "
            "implemented in flatscore yet",
        )
        for a in arms
        if "=" in a
    ]
    for a in [reference, *local]:
        if a not in ARMS:
            raise InputError(f"unknown arm {a!r}; known: {', '.join(ARMS.names())}", field="--arms")
    used, episodes, hallucinated = select_episodes(
        load_runs(runs), transcripts_arm, limit, episode_ids
    )

    loaded = load_model(model)
    backend = LocalBackend(loaded)
    decode = loaded.tokenizer.decode
    forced = [prepare(backend, e) for e in episodes]
    linears = quantizable_linears(loaded.model)
    saved = {n: m.weight.detach().clone() for n, m in linears.items()}
    calibration: list[list[int]] | None = None

    def set_arm(name: str) -> None:
        nonlocal calibration
        with torch.no_grad():
            for n, m in linears.items():
                m.weight.data.copy_(saved[n])
        if ARMS.make(name).awq and calibration is None:
            calibration = token_sequences(loaded.tokenizer, bundled_calibration())
        apply_arm(loaded.model, name, calibration)

    def logits(f: Forced) -> Any:
        return backend.teacher_force(f.ids, f.targets) if f.targets else np.zeros((0, 2))

    order = [reference, *[a for a in local if a != reference]]
    per_arm: dict[str, list[TokenMargins]] = {}
    bar = Progress(console=Console(stderr=True), disable=not progress, transient=True)
    with bar:
        task = bar.add_task("teacher forcing", total=len(order) * len(forced))
        set_arm(reference)
        refs = []
        for f in forced:
            refs.append(
                reference_top2(logits(f))
                if f.targets
                else (np.zeros(0), np.zeros(0, int), np.zeros(0, int))
            )
            bar.advance(task)
        for name in order[1:]:
            set_arm(name)
            per_arm[name] = []
            for f, r in zip(forced, refs, strict=True):
                per_arm[name].append(arm_against(r, logits(f)) if f.targets else concat([]))
                bar.advance(task)
        set_arm("ref")

    decision = np.concatenate([f.decision for f in forced]) if forced else np.zeros(0, bool)
    ref_margin = np.concatenate([r[0] for r in refs]) if refs else np.zeros(0)
    summaries = []
    for name in order[1:]:
        flipped: list[FlippedDecision] = []
        for f, m in zip(forced, per_arm[name], strict=True):
            flipped += _flipped_decisions(f, m, decode, hallucinated, max_flipped - len(flipped))
        summaries.append(summarize_arm(name, concat(per_arm[name]), decision, flipped, edges))
    notes = margins_notes(
        len(episodes),
        used,
        reference,
        loaded.description,
        dequantized_reference=loaded.name.startswith("smollm2") and model == "embedded",
    )
    return MarginsResult(
        model=loaded.name,
        model_description=loaded.description,
        runs=[str(r) for r in runs],
        transcripts_arm=used,
        reference_arm=reference,
        episodes=[e.episode_id for e in episodes],
        agent_tokens=int(decision.size),
        decision_tokens=int(decision.sum()),
        edges=[float(e) if np.isfinite(e) else None for e in edges],
        reference_agent_margins=margin_distribution(ref_margin, edges),
        reference_decision_margins=margin_distribution(ref_margin[decision], edges),
        arms=summaries,
        unavailable=unavailable,
        notes=notes,
    )
