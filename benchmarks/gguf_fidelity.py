"""GGUF files run by llama.cpp beside the in-process arms, against the torch reference.

The in-process arms (`--arms`, simulations) and GGUF files of the same model (`--quants`,
deployment formats; `ref` is the GGUF reference file) teacher-forced on the same held-out
bundled transcripts (the first `--transcripts`; 0: all) at the agent-written tokens, each
against the torch reference (the weights as loaded, fp32): top-1 agreement, mean
KL(ref || arm), the positions whose top-1 the arm changed ("flips") and the largest
reference margin among them (`flatscore.models.quant.evaluate.fidelity`; docs/arms.md).
Needs the `gguf` extra.
"""

from __future__ import annotations

import argparse

from benchmarks.harness import Table


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--transcripts", type=int, default=0, help="the first N (0: all)")
    parser.add_argument("--model", default="embedded", help="the model spec")
    parser.add_argument("--arms", nargs="+", default=["int8", "int4"])
    parser.add_argument("--quants", nargs="+", default=["ref", "Q8_0", "Q4_0"])


def run(args: argparse.Namespace) -> list[Table]:
    import torch

    from flatscore.models.quant.evaluate import fidelity

    torch.set_num_threads(args.threads)
    rows = fidelity(args.model, tuple(args.arms), tuple(args.quants), args.transcripts)
    head = [
        "arm",
        "kind",
        "format",
        "top-1 agree",
        "mean KL",
        "flips",
        "largest ref margin at a flip",
        "top-1 agree vs GGUF ref",
    ]
    cells: list[list[object]] = []
    for r in rows:
        a, margins = r.vs_ref.agreement, r.vs_ref.flip_margins
        vs = r.vs_gguf_ref.agreement if r.vs_gguf_ref is not None else None
        cells.append(
            [
                f"`{r.arm}`",
                r.kind,
                r.description,
                f"{100 * a.top1_agreement:.1f}%",
                f"{a.mean_kl:.4f}",
                len(margins),
                f"{max(margins, default=0.0):.2f}",
                f"{100 * vs.top1_agreement:.1f}%" if vs is not None else "-",
            ]
        )
    note = f"Positions: {rows[0].vs_ref.positions} agent-written tokens."
    return [Table(head, cells, "lllr", notes=[note])]
