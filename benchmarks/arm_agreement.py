"""How far each arm's next-token decisions move from the reference's.

Every arm of the embedded model (or `--arms`) applied to a freshly restored copy of the
reference weights and teacher-forced on the held-out bundled transcripts (AWQ calibrates
on the disjoint calibration split): the relative weight error, top-1 agreement and mean
KL(ref || arm), at every position and at the agent-written tokens only
(`flatscore.models.quant.evaluate.evaluate_arms`; docs/arms.md). ~1.5 min per arm on one
core.
"""

from __future__ import annotations

import argparse

from benchmarks.harness import Table


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--model", default="embedded", help="the model spec")
    parser.add_argument("--arms", nargs="+", help="default: every registered arm")


def run(args: argparse.Namespace) -> list[Table]:
    import torch

    from flatscore.models.quant.evaluate import evaluate_arms

    torch.set_num_threads(args.threads)
    rows = evaluate_arms(args.model, args.arms)
    head = [
        "arm",
        "format",
        "rel. weight error",
        "top-1 agree (all)",
        "mean KL (all)",
        "top-1 agree (agent)",
        "mean KL (agent)",
    ]
    cells: list[list[object]] = [
        [
            f"`{r.arm}`",
            r.description,
            f"{r.relative_error:.4f}",
            f"{100 * r.all_tokens.top1_agreement:.1f}%",
            f"{r.all_tokens.mean_kl:.4f}",
            f"{100 * r.agent_tokens.top1_agreement:.1f}%",
            f"{r.agent_tokens.mean_kl:.4f}",
        ]
        for r in rows
    ]
    n_all, n_agent = rows[0].all_tokens.positions, rows[0].agent_tokens.positions
    note = f"Positions: {n_all} (all), {n_agent} (agent-written tokens)."
    return [Table(head, cells, "llr", notes=[note])]
