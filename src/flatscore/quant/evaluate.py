"""How far an arm's next-token decisions move from the reference's, teacher-forced.

On the same token sequences, the arm's and the reference's next-token distributions are
compared at every position (or only at agent-written tokens): top-1 agreement and the mean
KL(ref || arm). Also used to check an arm end to end: `python -m flatscore.quant.evaluate`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class Agreement:
    positions: int
    top1_agreement: float
    mean_kl: float


def agreement(ref_logits: torch.Tensor, arm_logits: torch.Tensor) -> Agreement:
    """Top-1 agreement and mean KL(ref || arm) over rows of two [N, V] logit tensors."""
    if ref_logits.shape != arm_logits.shape:
        raise ValueError("logit tensors differ in shape")
    ref_lp = torch.log_softmax(ref_logits.float(), dim=-1)
    arm_lp = torch.log_softmax(arm_logits.float(), dim=-1)
    same = (ref_lp.argmax(dim=-1) == arm_lp.argmax(dim=-1)).float()
    kl = (ref_lp.exp() * (ref_lp - arm_lp)).sum(dim=-1)
    n = int(ref_logits.shape[0])
    return Agreement(n, float(same.mean()) if n else 1.0, float(kl.mean()) if n else 0.0)


@dataclass
class ArmRow:
    arm: str
    description: str
    relative_error: float
    all_tokens: Agreement
    agent_tokens: Agreement


def evaluate_arms(model_spec: str = "embedded", arms: list[str] | None = None) -> list[ArmRow]:
    """Apply each arm to a freshly restored copy of the reference weights and compare its
    teacher-forced next-token distributions with the reference on the held-out bundled
    transcripts (AWQ calibrates on the disjoint calibration split)."""
    from rich.progress import Progress

    from flatscore.models.embedded import load_model
    from flatscore.models.local import LocalBackend
    from flatscore.quant.arms import ARMS, apply_arm, quantizable_linears
    from flatscore.quant.calibration import bundled, token_sequences

    loaded = load_model(model_spec)
    backend = LocalBackend(loaded)
    linears = quantizable_linears(loaded.model)
    ref_weights = {n: m.weight.detach().clone() for n, m in linears.items()}
    heldout = [backend.transcript(c.messages, c.tools) for c in bundled("heldout")]
    calibration = token_sequences(loaded.tokenizer, bundled("calibration"))
    ref_logits = [backend.teacher_force(t.ids) for t in heldout]
    agent_rows = [
        torch.tensor([i - 1 for i in range(1, len(t.ids)) if t.agent_mask[i]]) for t in heldout
    ]
    rows = []
    names = arms or ARMS.names()
    with Progress(transient=True) as progress:
        task = progress.add_task("arms", total=len(names))
        for name in names:
            with torch.no_grad():
                for n, m in linears.items():
                    m.weight.data.copy_(ref_weights[n])
            result = apply_arm(loaded.model, name, calibration)
            arm_logits = [backend.teacher_force(t.ids) for t in heldout]
            rows.append(
                ArmRow(
                    arm=name,
                    description=ARMS.make(name).description,
                    relative_error=result.relative_error,
                    all_tokens=agreement(torch.cat(ref_logits), torch.cat(arm_logits)),
                    agent_tokens=agreement(
                        torch.cat([r[i] for r, i in zip(ref_logits, agent_rows, strict=True)]),
                        torch.cat([a[i] for a, i in zip(arm_logits, agent_rows, strict=True)]),
                    ),
                )
            )
            progress.advance(task)
    return rows


def markdown_table(rows: list[ArmRow]) -> str:
    lines = [
        "| arm | format | rel. weight error | top-1 agree (all) | mean KL (all) "
        "| top-1 agree (agent) | mean KL (agent) |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| `{r.arm}` | {r.description} | {r.relative_error:.4f} "
            f"| {100 * r.all_tokens.top1_agreement:.1f}% | {r.all_tokens.mean_kl:.4f} "
            f"| {100 * r.agent_tokens.top1_agreement:.1f}% | {r.agent_tokens.mean_kl:.4f} |"
        )
    n_all, n_agent = rows[0].all_tokens.positions, rows[0].agent_tokens.positions
    lines.append("")
    lines.append(f"Positions: {n_all} (all), {n_agent} (agent-written tokens).")
    return "\n".join(lines)


if __name__ == "__main__":
    import sys

    torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
    print(markdown_table(evaluate_arms()))
