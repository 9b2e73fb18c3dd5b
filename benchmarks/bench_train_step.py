"""Seconds per LoRA training step of the embedded agent, as `flatscore.train.train` runs it.

    OMP_NUM_THREADS=1 python benchmarks/bench_train_step.py --threads 1 --steps 3
    OMP_NUM_THREADS=2 python benchmarks/bench_train_step.py --threads 2 --steps 3

Compares LoRA on the upper half of the decoder (the recipe: layers 15-29) with LoRA on every
layer, on real training conversations of short, mean and long length, in one process. Size
the recipe's step count from the mean-length row (see docs/embedded.md).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from flatscore.analysis.markdown_table import row, table_lines
from flatscore.domains import get_domain
from flatscore.models.embedded import load_model
from flatscore.train.data import example_job, make_example, tokenize
from flatscore.train.train import TrainConfig, build_model, step_loss


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
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

    print(f"threads={args.threads}")
    print("\n".join(table_lines(["LoRA layers", "tokens", "s/step (median)"], [], "l")))
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
            print(row([f"{first}-29", len(ids), f"{statistics.median(times):.2f}"]), flush=True)


if __name__ == "__main__":
    main()
