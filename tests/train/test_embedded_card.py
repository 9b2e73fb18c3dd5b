"""The model card is generated from the training and evaluation files and says where the
reference arm comes from; installing refuses oversized adapters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flatscore.cli.embedded_card import render_card
from flatscore.errors import InputError
from flatscore.train.card import adapter_distance, install_adapter
from flatscore.train.card_stages import loss_table
from flatscore.train.evaluate import ArmDomainSummary
from flatscore.train.recipe import TrainConfig


def _train_dir(tmp_path: Path) -> Path:
    out = tmp_path / "train"
    out.mkdir()
    (out / "config.json").write_text(TrainConfig(steps=4).model_dump_json())
    data = [
        {"domain": "retail", "mistake": None, "ids": [1, 2, 3], "mask": [False, True, True]},
        {"domain": "telecom", "mistake": "role_confusion", "ids": [1, 2], "mask": [False, True]},
    ]
    (out / "dataset.json").write_text(json.dumps(data))
    losses = [{"step": s, "loss": 2.0 / s, "tokens": 10, "seconds": 1.5} for s in (1, 2, 3, 4)]
    (out / "loss.jsonl").write_text("\n".join(json.dumps(r) for r in losses) + "\n{broken")
    return out


def test_loss_table_known_answer() -> None:
    losses = [
        {"step": 1, "loss": 1.0, "tokens": 1},
        {"step": 2, "loss": 4.0, "tokens": 3},
        {"step": 3, "loss": 2.0, "tokens": 2},
    ]
    assert loss_table(losses, buckets=2) == [(1, 2, 3.25), (3, 3, 2.0)]


def test_card_states_origin_data_and_results(tmp_path: Path) -> None:
    train = _train_dir(tmp_path)
    evals = tmp_path / "eval"
    evals.mkdir()
    s = ArmDomainSummary(
        arm="ref",
        domain="telecom",
        episodes=4,
        succeeded=3,
        agent_calls=10,
        failed_calls=2,
        malformed=1,
        channels={"role_confusion": 2},
        terminations={"user_stop": 4},
        # task-weighted (the analysis' rate), not 2/10 pooled: the card prints this one
        channel_rates={"role_confusion": 0.25, "near_miss": None},
    )
    (evals / "summary.json").write_text(
        json.dumps({"meta": {"scope": "all test tasks"}, "summaries": [s.model_dump()]})
    )
    card = render_card(train, evals)
    assert "Q4_1" in card and "reference arm is not full precision" in card
    assert "| telecom | role_confusion | 1 |" in card
    assert "| retail | 1 | 1 | 0 | 0 of 0 | 0 |" in card  # one clean conversation
    assert "2 conversations, 5 tokens, 3 trained tokens" in card
    assert "| ref | telecom | 3/4 (75.0%) | 10 | 2 | 2 (25.0%) | 0 (–) |" in card
    assert "task-weighted" in card and "analysis.json" in card
    assert "Steps logged: 4" in card


def test_card_refuses_a_summary_without_the_analysis_rates(tmp_path: Path) -> None:
    """A summary.json written before the card took its rates from the analysis: one line
    naming file, record and field."""
    evals = tmp_path / "eval"
    evals.mkdir()
    record = {"arm": "ref", "domain": "telecom", "episodes": 1, "succeeded": 1}
    record |= {"agent_calls": 1, "failed_calls": 0, "malformed": 0}
    (evals / "summary.json").write_text(json.dumps({"meta": {}, "summaries": [record]}))
    with pytest.raises(InputError, match="rerun `flatscore eval-embedded`") as err:
        render_card(_train_dir(tmp_path), evals)
    assert "summaries[0]" in str(err.value) and "channel_rates" in str(err.value)


def test_install_refuses_missing_or_oversized(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no adapter weights"):
        install_adapter(tmp_path, tmp_path / "dst")
    (tmp_path / "adapter_model.safetensors").write_bytes(b"\0" * (26 * 1024 * 1024))
    with pytest.raises(InputError, match="25 MB"):
        install_adapter(tmp_path, tmp_path / "dst")


def _adapter(path: Path, a: list[float], b: list[float]) -> Path:
    import torch
    from safetensors.torch import save_file

    path.mkdir(parents=True)
    save_file(
        {"x.lora_A.weight": torch.tensor([a]), "x.lora_B.weight": torch.tensor([b])},
        str(path / "adapter_model.safetensors"),
    )
    return path


def test_adapter_distance_known_answer(tmp_path: Path) -> None:
    a = _adapter(tmp_path / "a", [3.0, 0.0], [0.0, 4.0])  # ‖a‖ = 5
    b = _adapter(tmp_path / "b", [3.0, 0.0], [0.0, 1.0])  # one entry off by 3
    worst, relative = adapter_distance(a, b)
    assert worst == pytest.approx(3.0) and relative == pytest.approx(3.0 / 5.0)
    assert adapter_distance(a, a) == (0.0, 0.0)


def _episodes(out: Path, rewards: dict[str, float], text: str = "hi") -> Path:
    from flatscore.episode import Episode, Message
    from flatscore.store.jsonl import EpisodeWriter

    out.mkdir()
    with EpisodeWriter(out / "ref.jsonl") as writer:
        for task, reward in rewards.items():
            writer.write(
                Episode(
                    episode_id=task, study="s", arm="ref", model="m", domain="retail",
                    task_id=task, termination_reason="user_stop", reward=reward,
                    messages=[Message(role="assistant", content=text, latency_s=reward)],
                )
            )  # fmt: skip
    return out


def test_card_reproduction_section_compares_loss_weights_and_eval(tmp_path: Path) -> None:
    train = _train_dir(tmp_path)
    original_adapter = _adapter(tmp_path / "committed", [3.0, 0.0], [0.0, 4.0])
    repro = tmp_path / "repro"
    repro.mkdir()
    (repro / "dataset.json").write_text((train / "dataset.json").read_text())
    losses = [{"step": s, "loss": 2.0 / s + (0.5 if s == 4 else 0.0)} for s in (1, 2, 3, 4)]
    (repro / "loss.jsonl").write_text("\n".join(json.dumps(r) for r in losses))
    _adapter(repro / "adapter", [3.0, 0.0], [0.0, 4.0])
    committed = _episodes(tmp_path / "eval", {"a": 1.0, "b": 0.0, "c": 1.0, "d": 1.0})
    reproduced = _episodes(tmp_path / "repro-eval", {"a": 1.0, "b": 1.0, "c": 1.0})

    card = render_card(
        train, committed, adapter_dir=original_adapter, repro_train=repro, repro_eval=reproduced
    )
    assert "## Reproduction" in card and "Reproduced run: 4 steps" in card
    assert "Loss at 4 common steps: 3 identical to 5 decimals, max |Δ| 0.50000" in card
    assert "Adapter weights: max |Δ| 0, relative L2 distance 0." in card
    # task d only ran in the committed evaluation; b differs; latency differences are ignored
    assert (
        "arm ref, on the 3 test tasks both runs did: outcome (reward and termination) "
        "identical on 2, whole transcript identical on 3." in card
    )
    assert "| ref | retail | 2/3 | 3/3 | 0 | 0 |" in card
    digest = card.split("Training data sha256: `")[1][:16]
    assert f"sha256: `{digest}` (reproduced run)" in card
