"""The card of a two-stage adapter: both stages' data and training, the pin between them
checked, the commands that rebuild it from scratch; a pin that does not match is one line."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from cli_runner import flatscore
from flatscore.errors import InputError
from flatscore.train.card import render_card
from flatscore.train.card_stages import stages_of
from flatscore.train.recipe import TrainConfig

WEIGHTS = "adapter_model.safetensors"


def _stage(path: Path, config: TrainConfig, weights: bytes | None, data: list[dict]) -> Path:
    """A training directory; the adapter's bytes only need a sha256 here."""
    path.mkdir(parents=True)
    (path / "config.json").write_text(config.model_dump_json())
    (path / "dataset.json").write_text(json.dumps(data))
    losses = [{"step": s, "loss": 1.0 / s, "tokens": 4, "seconds": 360.0} for s in range(1, 4)]
    (path / "loss.jsonl").write_text("\n".join(json.dumps(r) for r in losses))
    if weights is not None:
        (path / "adapter").mkdir()
        (path / "adapter" / WEIGHTS).write_bytes(weights)
    return path


def _record(domain: str, mistake: str | None) -> dict:
    return {
        "domain": domain,
        "mistake": mistake,
        "detour": False,
        "ids": [1, 7, 9],
        "mask": [0, 0, 1],
    }


STAGE2 = {
    "steps": 3,
    "lr": 2e-4,
    "mistakes_most": 3,
    "repeat_share": 0.35,
    "natural_mistakes": True,
}


def _stages(tmp_path: Path, pinned: bytes = b"stage 1") -> tuple[Path, Path]:
    first = _stage(tmp_path / "v2", TrainConfig(), b"stage 1", [_record("retail", None)])
    config = TrainConfig(**STAGE2, init_adapter_sha256=hashlib.sha256(pinned).hexdigest())
    data = [_record("retail", "invented+precondition"), _record("telecom", None)]
    second = _stage(tmp_path / "v3", config, b"stage 2", data)
    return first, second


def _digest(stage: Path) -> str:
    return hashlib.sha256((stage / "dataset.json").read_bytes()).hexdigest()[:16]


def test_two_stage_card_states_both_stages(tmp_path: Path) -> None:
    first, second = _stages(tmp_path)
    card = render_card(second, None, init_train=first)
    assert f"Training data sha256: stage 1 `{_digest(first)}`, stage 2 `{_digest(second)}`." in card
    sha1, sha2 = (hashlib.sha256(b).hexdigest() for b in (b"stage 1", b"stage 2"))
    assert f"stage 1 `{sha1}`, stage 2 (this adapter) `{sha2}`" in card
    assert "## Training data (stage 1 of 2)" in card and "## Training (stage 2 of 2)" in card
    assert f"From stage 1's adapter (sha256 `{sha1}`): 3 steps" in card and "lr 0.0002" in card
    assert "summed step time 0.30 h" in card  # 3 steps × 360 s
    assert "1–3 planted mistakes" in card and "made twice with probability 0.35" in card
    assert "| retail | 1 | 0 | 0 | 1 | 0 | 0 of 2 | 0 |" in card
    assert "| retail | precondition | 1 |" in card
    assert "flatscore train-embedded --out STAGE1" in card
    assert (
        "flatscore train-embedded --recipe recipe2.json --init STAGE1/adapter --out STAGE2" in card
    )
    recipe = json.loads(card.split("<<'EOF'\n")[1].split("\nEOF")[0])
    assert TrainConfig(**recipe) == TrainConfig.model_validate_json(
        (second / "config.json").read_text()
    )
    assert "Not evaluated yet" in card


def test_a_stage_pin_that_does_not_match_is_refused(tmp_path: Path) -> None:
    first, second = _stages(tmp_path, pinned=b"another adapter")
    with pytest.raises(InputError, match="init_adapter_sha256") as err:
        stages_of(second, first)
    assert str(first / "adapter" / WEIGHTS) in str(err.value)
    proc = flatscore(
        "embedded-card", "--train", second, "--init-train", first, "--out", tmp_path / "c.md"
    )
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert not (tmp_path / "c.md").exists()


def test_the_earlier_stage_is_required_and_must_have_its_adapter(tmp_path: Path) -> None:
    first, second = _stages(tmp_path)
    with pytest.raises(InputError, match="--init-train DIR"):
        stages_of(second, None)
    (first / "adapter" / WEIGHTS).unlink()
    with pytest.raises(InputError, match="is missing"):
        stages_of(second, first)
    with pytest.raises(InputError, match="drop --init-train"):
        stages_of(first, second)


def test_the_card_refuses_a_training_run_that_is_not_the_installed_adapter(tmp_path: Path) -> None:
    first, second = _stages(tmp_path)
    installed = tmp_path / "installed"
    installed.mkdir()
    (installed / WEIGHTS).write_bytes(b"something else")
    with pytest.raises(InputError, match=r"not the .* of the adapter the card describes"):
        render_card(second, None, init_train=first, adapter_dir=installed)
    (installed / WEIGHTS).write_bytes(b"stage 2")
    assert "this adapter" in render_card(second, None, init_train=first, adapter_dir=installed)


def test_bad_training_files_and_options_are_one_line(tmp_path: Path) -> None:
    first, second = _stages(tmp_path)
    (first / "dataset.json").write_text("[{broken")
    proc = flatscore("embedded-card", "--train", second, "--init-train", first)
    assert proc.returncode == 2 and "dataset.json: is not valid JSON" in proc.stderr, proc.stderr
    proc = flatscore("embedded-card", "--train", second, "--eval-study", tmp_path / "s.yaml")
    assert proc.returncode == 2 and "needs --eval-runs" in proc.stderr, proc.stderr
