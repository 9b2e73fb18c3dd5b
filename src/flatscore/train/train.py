"""LoRA fine-tuning of the embedded agent on CPU: reproducible, resumable, on agent tokens.

Recipe (`TrainConfig` defaults): the base is the Q4_1 GGUF dequantized to fp32; LoRA (peft)
of rank 16 on every projection (q, k, v, o, gate, up, down) of the upper half of the
decoder (layers 15-29), so the backward pass stops half-way down (about 2x cheaper per step
than LoRA everywhere, measured); one conversation per step, in a fixed seeded order;
AdamW, linear warm-up then cosine decay; loss = mean cross-entropy over the trained agent
tokens only, with the output head applied to those positions only (the 49k-word head is a
large share of the cost otherwise).

Output directory:
- `config.json` — the recipe; a resume must use the same one.
- `dataset.json` — the tokenized examples (regenerated deterministically when missing).
- `checkpoint/` — LoRA weights (`adapter_model.safetensors`) + `state.pt` (optimizer,
  scheduler, step), written every few minutes and at the end, replaced atomically.
- `loss.jsonl` — one line per step: step, loss, trained tokens, sequence length, seconds.
- `adapter/` — the final adapter once every step is done.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from flatscore.console import make_console, progress
from flatscore.errors import InputError
from flatscore.models.adapter import ADAPTER_FILE, adapter_sha256
from flatscore.store.jsonl import replace_whole
from flatscore.train.recipe import TrainConfig

TARGET_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


class RunOptions(BaseModel):
    """How this invocation runs (not part of the recipe)."""

    init: Path | None = None  # the adapter directory the recipe's init_adapter_sha256 names
    source: Path | None = None  # on-policy: the adapter that plays the rollouts (default: init)
    concurrency: int = Field(16, ge=1)  # on-policy: rollout episodes in flight
    threads: int = Field(1, ge=1)
    checkpoint_minutes: float = Field(4.0, gt=0)
    progress: bool = True
    log_every: int = Field(10, ge=1)


class StepDone(BaseModel):
    """A training step just done, for a caller without the bar to show (`flatscore
    train-embedded` prints it every `log_every` steps)."""

    step: int
    """1-based."""
    steps: int
    loss_ema: float
    """The loss's exponential moving average (weight 0.05 on the newest step)."""
    seconds: float
    """This step's wall time."""


# --------------------------------------------------------------------------- data


def load_dataset(config: TrainConfig, out: Path, tokenizer: Any) -> list[dict[str, Any]]:
    """Tokenized examples (`ids`, `mask`), cached in `out/dataset.json`."""
    path = out / "dataset.json"
    if path.is_file():
        data: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
        return data
    if config.on_policy is not None:
        from flatscore.run.driver import RUNS_DIR
        from flatscore.train.onpolicy import ROLLOUTS, onpolicy_records, write_summary

        data, summary = onpolicy_records(config, out / ROLLOUTS / RUNS_DIR, tokenizer)
        write_summary(out, summary)
        replace_whole(path, json.dumps(data).encode("utf-8"))
        return data
    from flatscore.train.data import build_examples, tokenize

    examples = build_examples(config)
    data = []
    for ex in examples:
        tok = tokenize(ex, tokenizer)
        ids, mask = tok.ids[: config.max_tokens], tok.labels_mask[: config.max_tokens]
        if any(mask[1:]):
            data.append(
                {
                    "domain": ex.domain,
                    "task_id": ex.task_id,
                    "seed": ex.seed,
                    "mistake": ex.mistake,
                    "detour": ex.detour,
                    "ids": ids,
                    "mask": mask,
                }
            )
    replace_whole(path, json.dumps(data).encode("utf-8"))
    return data


def example_order(n: int, step: int, seed: int) -> int:
    """The example used at `step`: a fresh seeded permutation every epoch."""
    epoch, offset = divmod(step, n)
    order = list(range(n))
    random.Random(f"order|{seed}|{epoch}").shuffle(order)
    return order[offset]


def lr_factor(step: int, config: TrainConfig) -> float:
    """Linear warm-up to 1, then cosine decay to `min_lr_ratio`."""
    if step < config.warmup:
        return (step + 1) / config.warmup
    span = max(1, config.steps - config.warmup)
    progress = min(1.0, (step - config.warmup) / span)
    cosine = 0.5 * (1 + math.cos(math.pi * progress))
    return config.min_lr_ratio + (1 - config.min_lr_ratio) * cosine


# --------------------------------------------------------------------------- files


def _check_config(out: Path, config: TrainConfig, resume: bool) -> None:
    path = out / "config.json"
    if path.is_file():
        saved = TrainConfig.model_validate_json(path.read_text(encoding="utf-8"))
        if not resume:
            raise InputError(
                "holds a training run already; pass --resume to continue it, or choose "
                "another --out",
                file=str(out),
            )
        if saved != config:
            diff = [k for k in TrainConfig.model_fields if getattr(saved, k) != getattr(config, k)]
            raise InputError(
                f"was trained with a different recipe ({', '.join(diff)} differ)",
                file=str(path),
            )
    else:
        out.mkdir(parents=True, exist_ok=True)
        replace_whole(path, config.model_dump_json(indent=2).encode("utf-8"))


def init_weights(config: TrainConfig, init: Path | None) -> Path | None:
    """The adapter the recipe starts from, checked against the hash it pins."""
    if config.init_adapter_sha256 is None:
        return None
    if init is None:
        raise InputError(
            "the recipe starts from an adapter (init_adapter_sha256); pass --init DIR",
            field="init_adapter_sha256",
        )
    return pinned_adapter(init, config.init_adapter_sha256)


def pinned_adapter(folder: Path, sha256: str) -> Path:
    """`folder`, checked to hold adapter weights that hash to `sha256`."""
    if not (folder / ADAPTER_FILE).is_file():
        raise InputError(f"no {ADAPTER_FILE} here", file=str(folder))
    found = adapter_sha256(folder)
    if found != sha256:
        raise InputError(
            f"adapter weights hash {found[:16]}…, the recipe pins {sha256[:16]}…",
            file=str(folder / ADAPTER_FILE),
        )
    return folder


def rollout_source(config: TrainConfig, options: RunOptions) -> Path | None:
    """An on-policy stage's rollout adapter (`--source`, else `--init`), checked against
    `on_policy.source_adapter_sha256`; None for other stages."""
    if config.on_policy is None:
        return None
    folder = options.source or options.init
    if folder is None:
        raise InputError(
            "the recipe's on-policy data are played by an adapter "
            "(on_policy.source_adapter_sha256); pass --source DIR (or --init DIR)",
            field="on_policy.source_adapter_sha256",
        )
    return pinned_adapter(folder, config.on_policy.source_adapter_sha256)


def save_checkpoint(model: Any, optimizer: Any, scheduler: Any, step: int, out: Path) -> None:
    """Write `out/checkpoint` atomically (a new directory, then a rename)."""
    import torch

    final = out / "checkpoint"
    tmp = out / "checkpoint.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    model.save_pretrained(str(tmp))
    torch.save(
        {"step": step, "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict()},
        tmp / "state.pt",
    )
    old = out / "checkpoint.old"
    if final.exists():
        os.replace(final, old)
    os.replace(tmp, final)
    if old.exists():
        shutil.rmtree(old)


def checkpoint_step(out: Path) -> int:
    """The step the last checkpoint in `out` reached (0 when there is none)."""
    import torch

    state = out / "checkpoint" / "state.pt"
    if not state.is_file():
        return 0
    return int(torch.load(state, weights_only=False)["step"])


def read_losses(out: Path) -> list[dict[str, Any]]:
    """The loss log, one record per step (the last record wins for a repeated step)."""
    path = out / "loss.jsonl"
    if not path.is_file():
        return []
    by_step: dict[int, dict[str, Any]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # a line cut by a kill
        by_step[int(rec["step"])] = rec
    return [by_step[s] for s in sorted(by_step)]


# --------------------------------------------------------------------------- training


def build_model(config: TrainConfig, base_model: Any) -> Any:
    """The peft model: LoRA on the target projections of layers `first_layer`.. only."""
    import torch
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(config.seed)
    layers = int(base_model.config.num_hidden_layers)
    lora = LoraConfig(
        r=config.rank,
        lora_alpha=config.alpha,
        lora_dropout=0.0,
        target_modules=list(TARGET_MODULES),
        layers_to_transform=list(range(min(config.first_layer, layers - 1), layers)),
        bias="none",
    )
    return get_peft_model(base_model, lora)


def step_loss(model: Any, ids: list[int], mask: list[bool]) -> Any:
    """Mean cross-entropy of the trained tokens; the head runs on those positions only."""
    import torch

    inner = model.base_model.model  # the transformers CausalLM under the LoRA layers
    hidden = inner.model(input_ids=torch.tensor([ids])).last_hidden_state[0]
    positions = torch.tensor([i for i in range(1, len(ids)) if mask[i]], dtype=torch.long)
    logits = inner.lm_head(hidden[positions - 1])
    return torch.nn.functional.cross_entropy(logits.float(), torch.tensor(ids)[positions])


def train(
    config: TrainConfig,
    out: str | Path,
    *,
    resume: bool = False,
    options: RunOptions | None = None,
    loaded: Any = None,
    stop_after: int | None = None,
    on_step: Callable[[StepDone], None] | None = None,
) -> Path | None:
    """Train (or continue) the adapter in `out`. Returns `out/adapter` when every step is
    done, None when stopped early (`stop_after` steps, for tests and time-boxed runs).
    `loaded` is a `LoadedModel` to train instead of `config.base` (tests use a tiny one).
    `on_step`: every `options.log_every` steps when the bar is off."""
    import torch
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    options = options or RunOptions()
    out = Path(out)
    torch.set_num_threads(options.threads)
    _check_config(out, config, resume)
    init = init_weights(config, options.init)
    source = rollout_source(config, options)
    if source is not None and not (out / "dataset.json").is_file():
        # before the weights to train are loaded: the rollouts load their own
        from flatscore.train.onpolicy import rollout_study, run_rollouts

        study = rollout_study(
            config, source, out, threads=options.threads, concurrency=options.concurrency
        )
        run_rollouts(study, progress=options.progress)
    if loaded is None:
        from flatscore.models.embedded import load_model

        loaded = load_model(config.base)
    data = load_dataset(config, out, loaded.tokenizer)
    if not data:
        raise InputError("no training examples were produced", file=str(out))

    model = build_model(config, loaded.model)
    if init is not None:
        set_peft_model_state_dict(model, load_file(str(init / ADAPTER_FILE)))
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(s, config))

    start = 0
    ckpt = out / "checkpoint"
    if resume and (ckpt / "state.pt").is_file():
        set_peft_model_state_dict(model, load_file(str(ckpt / "adapter_model.safetensors")))
        state = torch.load(ckpt / "state.pt", weights_only=False)
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        start = int(state["step"])

    end = config.steps if stop_after is None else min(config.steps, stop_after)
    log = (out / "loss.jsonl").open("a", encoding="utf-8")
    err = make_console(stderr=True)
    bar = progress(err, "loss {task.fields[loss]}", enabled=options.progress)
    last_save = time.monotonic()
    ema: float | None = None
    try:
        with bar:
            task = bar.add_task("train-embedded", total=config.steps, completed=start, loss="-")
            for step in range(start, end):
                t0 = time.perf_counter()
                ex = data[example_order(len(data), step, config.seed)]
                loss = step_loss(model, ex["ids"], ex["mask"])
                loss.backward()
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                value = float(loss.detach())
                ema = value if ema is None else 0.95 * ema + 0.05 * value
                rec = {
                    "step": step + 1,
                    "loss": round(value, 5),
                    "lr": scheduler.get_last_lr()[0],
                    "tokens": sum(ex["mask"]),
                    "length": len(ex["ids"]),
                    "seconds": round(time.perf_counter() - t0, 3),
                    "time": time.time(),
                }
                log.write(json.dumps(rec) + "\n")
                log.flush()
                bar.update(task, advance=1, loss=f"{ema:.3f}")
                due = not options.progress and (step + 1) % options.log_every == 0
                if due and on_step is not None:
                    on_step(
                        StepDone(
                            step=step + 1, steps=config.steps, loss_ema=ema, seconds=rec["seconds"]
                        )
                    )
                if time.monotonic() - last_save > options.checkpoint_minutes * 60:
                    save_checkpoint(model, optimizer, scheduler, step + 1, out)
                    last_save = time.monotonic()
    finally:
        log.close()
    if end > start:
        save_checkpoint(model, optimizer, scheduler, end, out)
    if end < config.steps:
        return None
    final = out / "adapter"
    if final.exists():
        shutil.rmtree(final)
    shutil.copytree(ckpt, final, ignore=shutil.ignore_patterns("state.pt"))
    return final
