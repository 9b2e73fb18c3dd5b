"""The model card is generated from the training and evaluation files and says where the
reference arm comes from; installing refuses oversized adapters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flatscore.embedded.card import install_adapter, loss_table, render_card
from flatscore.embedded.evaluate import ArmDomainSummary
from flatscore.embedded.train import TrainConfig
from flatscore.errors import InputError


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
    )
    (evals / "summary.json").write_text(
        json.dumps({"meta": {"scope": "all test tasks"}, "summaries": [s.model_dump()]})
    )
    card = render_card(train, evals)
    assert "Q4_1" in card and "reference arm is not full precision" in card
    assert "| telecom | role_confusion | 1 |" in card and "| retail | clean | 1 |" in card
    assert "2 conversations, 5 tokens, 3 trained tokens" in card
    assert "| ref | telecom | 3/4 (75.0%) | 10 | 2 | 2 (20.0%) |" in card
    assert "Steps logged: 4" in card


def test_install_refuses_missing_or_oversized(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no adapter weights"):
        install_adapter(tmp_path, tmp_path / "dst")
    (tmp_path / "adapter_model.safetensors").write_bytes(b"\0" * (26 * 1024 * 1024))
    with pytest.raises(InputError, match="25 MB"):
        install_adapter(tmp_path, tmp_path / "dst")
