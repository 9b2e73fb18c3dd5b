"""How far an arm's next-token decisions move from the reference's, teacher-forced.

On the same token sequences, the arm's and the reference's next-token distributions are
compared at every position (or only at agent-written tokens): top-1 agreement and the mean
KL(ref || arm). `evaluate_arms` checks every arm end to end (`python -m benchmarks
arm-agreement`).

`fidelity` puts the deployment formats beside the simulations: GGUF files run by llama.cpp
(`GgufBackend.teacher_force`) and in-process arms, on the same token ids, against the same
torch reference (`python -m benchmarks gguf-fidelity`; docs/arms.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
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
    from flatscore.models.quant.arms import ARMS, apply_arm, quantizable_linears
    from flatscore.models.quant.calibration import bundled, token_sequences

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


@dataclass
class Tally:
    """Top-1 agreement, KL(ref || arm) and the largest reference margin (top-1 minus top-2
    logprob) among the positions whose top-1 the arm changed, summed over transcripts."""

    positions: int = 0
    same: int = 0
    kl_sum: float = 0.0
    flip_margins: list[float] = field(default_factory=list)

    def add(self, ref_logits: np.ndarray, arm_logits: np.ndarray) -> None:
        ref_lp = torch.log_softmax(torch.from_numpy(ref_logits).float(), dim=-1)
        arm_lp = torch.log_softmax(torch.from_numpy(arm_logits).float(), dim=-1)
        ref_top = ref_lp.argmax(dim=-1)
        same = ref_top == arm_lp.argmax(dim=-1)
        self.positions += int(same.numel())
        self.same += int(same.sum())
        self.kl_sum += float((ref_lp.exp() * (ref_lp - arm_lp)).sum(dim=-1).sum())
        top2 = torch.topk(ref_lp[~same], 2, dim=-1).values if (~same).any() else None
        if top2 is not None:
            self.flip_margins += (top2[:, 0] - top2[:, 1]).tolist()

    @property
    def agreement(self) -> Agreement:
        n = self.positions
        return Agreement(n, self.same / n if n else 1.0, self.kl_sum / n if n else 0.0)


@dataclass
class FidelityRow:
    arm: str
    kind: str  # "simulation" (in-process, torch) or "deployment" (a GGUF file, llama.cpp)
    description: str
    vs_ref: Tally  # against the torch reference
    vs_gguf_ref: Tally | None = None  # a GGUF arm against the GGUF reference file


def fidelity(
    model_spec: str = "embedded",
    arms: tuple[str, ...] = ("int8", "int4"),
    quants: tuple[str, ...] = ("ref", "Q8_0", "Q4_0"),
    transcripts: int = 0,
) -> list[FidelityRow]:
    """In-process `arms` and GGUF `quants` of `model_spec` (`ref`: the GGUF reference file)
    teacher-forced on the same held-out bundled transcripts (the first `transcripts`; 0:
    all), at the agent-written tokens, each against the torch reference (the weights as
    loaded, fp32). One transcript and one arm at a time: a 135M model's logits are 200 KB a
    position, so only the reference's and one arm's are held (peak RSS 2.1 GB for SmolLM2)."""
    from flatscore.models.embedded import load_model
    from flatscore.models.gguf import GgufBackend
    from flatscore.models.gguf_files import resolve_arm
    from flatscore.models.local import LocalBackend
    from flatscore.models.quant.arms import ARMS, apply_arm, quantizable_linears
    from flatscore.models.quant.calibration import bundled, token_sequences

    # GGUF files first (the embedded reference is exported from a model load of its own).
    files = {q: resolve_arm(model_spec, q) for q in quants}
    loaded = load_model(model_spec)
    backend = LocalBackend(loaded)
    linears = quantizable_linears(loaded.model)
    ref_weights = {n: m.weight.detach().clone() for n, m in linears.items()}
    convs = bundled("heldout")[: transcripts or None]
    calibration = token_sequences(loaded.tokenizer, bundled("calibration"))
    rows = {a: FidelityRow(a, "simulation", ARMS.make(a).description, Tally()) for a in arms}
    for q, f in files.items():
        rows[f"gguf:{q}"] = FidelityRow(
            f"gguf:{q}",
            "deployment",
            f"llama.cpp, {f.quant} file",
            Tally(),
            Tally() if q != "ref" and "ref" in files else None,
        )

    def restore() -> None:
        with torch.no_grad():
            for n, m in linears.items():
                m.weight.data.copy_(ref_weights[n])

    for conv in convs:
        t = backend.transcript(conv.messages, conv.tools)
        targets = [i for i in range(1, len(t.ids)) if t.agent_mask[i]]
        if not targets:
            continue
        restore()
        ref = backend.teacher_force(t.ids, targets).numpy()
        for a in arms:
            restore()
            apply_arm(loaded.model, a, calibration)
            rows[a].vs_ref.add(ref, backend.teacher_force(t.ids, targets).numpy())
        gguf_ref = None
        for q, f in files.items():
            g = GgufBackend(f, threads=1, max_context=64, max_batch=1)
            try:
                logits = g.teacher_force(t.ids, targets)
            finally:
                g.close()
            row = rows[f"gguf:{q}"]
            row.vs_ref.add(ref, logits)
            if q == "ref":
                gguf_ref = logits
            elif row.vs_gguf_ref is not None and gguf_ref is not None:
                row.vs_gguf_ref.add(gguf_ref, logits)
    restore()
    return list(rows.values())
