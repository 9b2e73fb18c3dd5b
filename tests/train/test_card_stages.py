"""The card of a two-stage adapter: both stages' data and training, the pin between them
checked, the commands that rebuild it from scratch; a pin that does not match is one line."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest

from cli_runner import flatscore
from flatscore.cli.embedded_card import render_card
from flatscore.errors import InputError
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


# --- the card is unchanged where the chain is, and describes longer chains ----------------

FIXTURES = Path(__file__).parents[1] / "fixtures" / "cards"
GEMMA = Path(__file__).parents[2] / "studies" / "embedded-train-gemma"
GEMMA_CHAIN = ["stage1", "stage2", "round1", "round2", "round3"]
GENERATED = re.compile(r"on \d{4}-\d\d-\d\d \d\d:\d\d UTC")


def _undated(card: str) -> str:
    return GENERATED.sub("on DATE UTC", card)


def test_one_and_two_stage_cards_are_unchanged_byte_for_byte(tmp_path: Path) -> None:
    first, second = _stages(tmp_path)
    two = render_card(second, None, init_train=first, note="A note.")
    assert _undated(two) == (FIXTURES / "two-stage.md").read_text(encoding="utf-8")
    assert _undated(render_card(first, None)) == (FIXTURES / "one-stage.md").read_text(
        encoding="utf-8"
    )


def _gemma_card(chain: list[Path], note: str = "") -> str:
    return render_card(chain[-1], None, init_train=chain[:-1], note=note)


def test_the_gemma_chain_of_two_stages_and_three_rounds_known_answer() -> None:
    card = _gemma_card([GEMMA / name for name in GEMMA_CHAIN])
    assert card.startswith("# flatscore embedded agent: Gemma 3 270M + LoRA\n")
    assert "decoder layers 9–17 (peft)" in card and "- 270M parameters" in card
    assert "Trained in 5 stages" in card and "stage 3, stage 4, stage 5;" in card
    assert "stage 5 (this adapter) `493af20582a959c73db7372129d2b0cad2" in card
    assert "## Training data (stage 5 of 5: on-policy round 3)" in card
    # round 3's onpolicy.json and recipe, as the files hold them
    assert (
        "- 408 episodes, 152 with a failed call: 796 failed states (217 repeat the previous "
        "failed call, 107 re-issue a call that had succeeded, 205 off the gold path, 38 "
        "without a label and not kept; 378 hold a planted call, 2 of the planted arm's states"
    ) in card
    assert "call 574, closing 5, final 177, instruction 2; 6 cut at max_tokens" in card
    assert "2 trials per task (seeds 3000–3001), temperature 0.5" in card
    assert "(role_confusion p = 0.05, drop_argument p = 0.1, wrong_value p = 0.6)" in card
    assert "752 on-policy conversations and 251 drawn" in card
    assert "the conversations of stage 2's data (the same recipe fields)" in card
    # round 2 sampled at T 1 and planted nothing
    assert "3 trials per task (seeds 2000–2002), temperature 1, top-p 1" in card
    assert "summed step time 1.46 h" in card  # stage 1's loss.jsonl
    assert "Training data sha256: not stated (no stage folder holds" in card
    assert "pip install '.[gemma]'" in card
    assert "--recipe recipe5.json --init STAGE4/adapter --out STAGE5" in card
    recipe = json.loads(card.split("cat > recipe5.json <<'EOF'\n")[1].split("\nEOF")[0])
    assert TrainConfig(**recipe) == TrainConfig.model_validate_json(
        (GEMMA / "round3" / "config.json").read_text()
    )


def test_the_committed_gemma_card_is_the_code_s() -> None:
    committed = (GEMMA / "round3" / "MODEL_CARD.md").read_text(encoding="utf-8")
    note = committed.split("\n> ", 1)[1].split("\n", 1)[0]
    fresh = _gemma_card([GEMMA / name for name in GEMMA_CHAIN], note=note)
    head = lambda card: _undated(card).split("## Evaluation")[0]  # noqa: E731
    assert head(committed) == head(fresh)


def _copy_chain(tmp_path: Path) -> list[Path]:
    """The Gemma chain's card files (not the rollouts' archives)."""
    out = []
    for name in GEMMA_CHAIN:
        target = tmp_path / name
        target.mkdir()
        for f in (GEMMA / name).iterdir():
            if f.is_file():
                shutil.copyfile(f, target / f.name)
        out.append(target)
    return out


@pytest.mark.parametrize(
    ("stage", "missing"),
    [("round2", "onpolicy.json"), ("stage1", WEIGHTS), ("stage2", "loss.jsonl")],
)
def test_a_chain_missing_a_file_is_one_line_naming_it(
    tmp_path: Path, stage: str, missing: str
) -> None:
    chain = _copy_chain(tmp_path)
    (tmp_path / stage / missing).unlink()
    with pytest.raises(InputError) as err:
        stages_of(chain[-1], chain[:-1])
    assert str(err.value).startswith(f"{tmp_path / stage / missing}: is missing")
    if missing != "onpolicy.json":
        return
    args: list[str | Path] = ["embedded-card", "--train", chain[-1]]
    for earlier in chain[:-1]:
        args += ["--init-train", earlier]
    proc = flatscore(*args, "--out", tmp_path / "card.md")
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert f"{tmp_path / stage / missing}: is missing" in proc.stderr
    assert not (tmp_path / "card.md").exists()


def test_a_chain_cut_short_or_out_of_order_is_refused(tmp_path: Path) -> None:
    chain = _copy_chain(tmp_path)
    with pytest.raises(InputError, match="pass its training directory too"):
        stages_of(chain[-1], chain[1:-1])  # stage 1 left out
    with pytest.raises(InputError, match="init_adapter_sha256"):
        stages_of(chain[-1], [chain[0], chain[2], chain[1], chain[3]])
    with pytest.raises(InputError, match="drop the --init-train before it"):
        stages_of(chain[1], [chain[0], chain[0]])
    (chain[1] / "config.json").unlink()
    with pytest.raises(InputError, match=r"config\.json: is missing: not a training directory"):
        stages_of(chain[-1], chain[:-1])
