"""Training: resume continues exactly from the checkpoint; the recipe is guarded; the
schedule and the example order are what the docstrings say. A tiny random Llama with the
real tokenizer stands in for SmolLM2 so this stays fast."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flatscore.errors import InputError
from flatscore.train.train import (
    RunOptions,
    StepDone,
    TrainConfig,
    checkpoint_step,
    example_order,
    lr_factor,
    read_losses,
    train,
)
from tiny_llama_model import tiny_llama

CONFIG = TrainConfig(
    variants=1,
    domains=("telecom",),
    steps=4,
    warmup=1,
    first_layer=1,
    max_tokens=640,
    rank=4,
    alpha=8,
    lr=1e-2,
)
OPTIONS = RunOptions(progress=False)


def _tiny(tokenizer: Any) -> Any:
    from flatscore.models.embedded import LoadedModel

    model = tiny_llama(vocab=len(tokenizer), hidden=32, heads=2, positions=1024)
    return LoadedModel(model=model, tokenizer=tokenizer, name="tiny", description="tiny")


def _adapter(out: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    return load_file(str(out / "adapter" / "adapter_model.safetensors"))


def _write_dataset(out: Path, tokenizer: Any) -> None:
    """A few real examples, tokenized as `load_dataset` would (it reuses `dataset.json`)."""
    from flatscore.domains import get_domain
    from flatscore.train.data import example_job, make_example, tokenize

    data = []
    for i, task in enumerate(get_domain("telecom").tasks("train")[:3]):
        ex = make_example(example_job(task, i, with_mistake=i == 1))
        assert ex is not None
        tok = tokenize(ex, tokenizer)
        data.append(
            {"ids": tok.ids[: CONFIG.max_tokens], "mask": tok.labels_mask[: CONFIG.max_tokens]}
        )
    (out / "dataset.json").write_text(json.dumps(data))


@pytest.fixture(scope="module")
def straight(tmp_path_factory: pytest.TempPathFactory, tokenizer: Any) -> Path:
    out = tmp_path_factory.mktemp("straight")
    _write_dataset(out, tokenizer)
    assert train(CONFIG, out, options=OPTIONS, loaded=_tiny(tokenizer)) == out / "adapter"
    return out


def test_resume_continues_from_the_checkpoint(
    straight: Path, tmp_path: Path, tokenizer: Any
) -> None:
    import torch

    # Reuse the tokenized data so both runs see identical examples.
    (tmp_path / "dataset.json").write_text((straight / "dataset.json").read_text())
    assert train(CONFIG, tmp_path, options=OPTIONS, loaded=_tiny(tokenizer), stop_after=2) is None
    assert checkpoint_step(tmp_path) == 2
    assert not (tmp_path / "adapter").exists()
    # A fresh process would load the base again: so do we.
    done = train(CONFIG, tmp_path, resume=True, options=OPTIONS, loaded=_tiny(tokenizer))
    assert done == tmp_path / "adapter"
    assert checkpoint_step(tmp_path) == 4
    a, b = _adapter(straight), _adapter(tmp_path)
    assert a.keys() == b.keys() and a
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=1e-6)
    assert [r["loss"] for r in read_losses(tmp_path)] == [r["loss"] for r in read_losses(straight)]
    # The LoRA weights moved away from their (zero-product) start.
    assert any(float(t.abs().max()) > 0 for k, t in a.items() if "lora_B" in k)


def test_a_second_run_needs_resume_and_the_same_recipe(straight: Path, tokenizer: Any) -> None:
    with pytest.raises(InputError, match="--resume"):
        train(CONFIG, straight, options=OPTIONS, loaded=_tiny(tokenizer))
    other = CONFIG.model_copy(update={"lr": 1e-3})
    with pytest.raises(InputError, match="lr"):
        train(other, straight, resume=True, options=OPTIONS, loaded=_tiny(tokenizer))


def test_without_the_bar_every_log_every_th_step_is_handed_back(
    straight: Path, tmp_path: Path, tokenizer: Any
) -> None:
    """`on_step` gets the step, the steps, the loss's moving average and the step's time
    (the caller prints them); every `log_every` steps, none in between."""
    (tmp_path / "dataset.json").write_text((straight / "dataset.json").read_text())
    seen: list[StepDone] = []
    options = RunOptions(progress=False, log_every=2)
    train(
        CONFIG,
        tmp_path,
        options=options,
        loaded=_tiny(tokenizer),
        stop_after=3,
        on_step=seen.append,
    )
    first, second = (r["loss"] for r in read_losses(tmp_path)[:2])
    (done,) = seen
    assert (done.step, done.steps) == (2, CONFIG.steps)
    assert done.loss_ema == pytest.approx(0.95 * first + 0.05 * second, abs=1e-4)
    assert done.seconds == read_losses(tmp_path)[1]["seconds"]


def test_loss_log_and_config_are_written(straight: Path) -> None:
    losses = read_losses(straight)
    assert [r["step"] for r in losses] == [1, 2, 3, 4]
    assert all(r["tokens"] > 0 and r["loss"] > 0 for r in losses)
    saved = TrainConfig.model_validate(json.loads((straight / "config.json").read_text()))
    assert saved == CONFIG


def test_lr_schedule_known_values() -> None:
    c = TrainConfig(steps=110, warmup=10, lr=1.0, min_lr_ratio=0.1)
    assert lr_factor(0, c) == pytest.approx(0.1)
    assert lr_factor(9, c) == pytest.approx(1.0)
    assert lr_factor(10, c) == pytest.approx(1.0)
    assert lr_factor(60, c) == pytest.approx(0.55)  # half-way down the cosine
    assert lr_factor(110, c) == pytest.approx(0.1)


@given(st.integers(1, 50), st.integers(0, 3), st.integers(0, 5))
def test_every_epoch_is_a_permutation(n: int, epoch: int, seed: int) -> None:
    picks = [example_order(n, epoch * n + i, seed) for i in range(n)]
    assert sorted(picks) == list(range(n))


def test_a_recovery_stage_starts_from_the_pinned_adapter(
    straight: Path, tmp_path: Path, tokenizer: Any
) -> None:
    """A recipe with `init_adapter_sha256` trains on top of that adapter: its first step's
    loss is the first stage's trained loss, not the base model's; a wrong or missing
    adapter is one line naming the file or the field."""
    from flatscore.models.adapter import adapter_sha256

    first = straight / "adapter"
    stage = CONFIG.model_copy(update={"init_adapter_sha256": adapter_sha256(first), "steps": 1})
    (tmp_path / "dataset.json").write_text((straight / "dataset.json").read_text())
    from_init = RunOptions(progress=False, init=first)
    assert train(stage, tmp_path, options=from_init, loaded=_tiny(tokenizer))
    base = tmp_path / "base"
    base.mkdir()
    (base / "dataset.json").write_text((straight / "dataset.json").read_text())
    train(CONFIG.model_copy(update={"steps": 1}), base, options=OPTIONS, loaded=_tiny(tokenizer))
    # the same first example, different starting weights
    assert read_losses(tmp_path)[0]["loss"] != read_losses(base)[0]["loss"]

    with pytest.raises(InputError, match="pass --init DIR"):
        train(stage, tmp_path / "x", options=OPTIONS, loaded=_tiny(tokenizer))
    wrong = stage.model_copy(update={"init_adapter_sha256": "0" * 64})
    with pytest.raises(InputError, match="the recipe pins 0000") as err:
        train(wrong, tmp_path / "y", options=from_init, loaded=_tiny(tokenizer))
    assert "adapter_model.safetensors" in err.value.one_line()


def test_a_recipe_file_is_validated_in_one_line(tmp_path: Path) -> None:
    from flatscore.train.recipe import load_recipe

    assert load_recipe(None) == TrainConfig()
    good = tmp_path / "recipe.json"
    good.write_text(json.dumps({"steps": 7, "mistakes_most": 3}))
    assert load_recipe(good) == TrainConfig(steps=7, mistakes_most=3)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"steps": 7, "mistakes_most": 9}))
    with pytest.raises(InputError) as err:
        load_recipe(bad)
    assert err.value.one_line().startswith(f"{bad}, field 'mistakes_most'")
    with pytest.raises(InputError, match="cannot read the recipe"):
        load_recipe(tmp_path / "missing.json")


def test_the_committed_recovery_recipe_pins_the_committed_first_stage() -> None:
    """studies/embedded-train-v3/recipe.json starts from studies/embedded-train-v2's adapter."""
    from flatscore.models.adapter import adapter_sha256
    from flatscore.train.recipe import load_recipe

    studies = Path(__file__).resolve().parents[2] / "studies"
    recipe = load_recipe(studies / "embedded-train-v3" / "recipe.json")
    assert recipe.init_adapter_sha256 == adapter_sha256(studies / "embedded-train-v2")
    assert recipe.natural_mistakes and recipe.mistakes_most > 1 and recipe.repeat_share > 0
