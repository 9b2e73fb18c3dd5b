"""Seconds per LoRA training step of the embedded agent.

As `flatscore.train.train` runs it (set OMP_NUM_THREADS to `--threads`). Compares LoRA
on the upper half of the decoder (the recipe: layers 15-29) with LoRA on every layer, on
real training conversations of short, mean and long length, in one process. Size the
recipe's step count from the mean-length row (see docs/embedded.md).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from benchmarks.harness import Table
from flatscore.domains import get_domain
from flatscore.models.embedded import load_model
from flatscore.train.data import example_job, make_example, tokenize
from flatscore.train.recipe import TrainConfig
from flatscore.train.train import build_model, step_loss


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=3)


def run(args: argparse.Namespace) -> list[Table]:
    torch.set_num_threads(args.threads)

    tokenizer = load_model("embedded-base").tokenizer
    samples = []
    for domain, index in (("telecom", 0), ("retail", 0), ("retail", 12)):
        ex = make_example(
            example_job(get_domain(domain).tasks("train")[index], 0, with_mistake=False)
        )
        assert ex is not None
        tok = tokenize(ex, tokenizer)
        samples.append((tok.ids, tok.labels_mask))

    rows: list[list[object]] = []
    for first in (15, 0):
        model = build_model(TrainConfig(first_layer=first), load_model("embedded-base").model)
        model.train()
        params = [p for p in model.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(params, lr=1e-4)
        for ids, mask in samples:
            times = []
            for _ in range(args.steps):
                t0 = time.perf_counter()
                step_loss(model, ids, mask).backward()
                opt.step()
                opt.zero_grad()
                times.append(time.perf_counter() - t0)
            rows.append([f"{first}-29", len(ids), f"{statistics.median(times):.2f}"])
            print(*rows[-1], flush=True)
    header = ["LoRA layers", "tokens", f"s/step (median, {args.threads} threads)"]
    return [Table(header, rows, "lr")]
