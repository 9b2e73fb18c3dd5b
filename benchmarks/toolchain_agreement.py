"""flatscore's hand-written arms held against llm-compressor's checkpoints of the same weights.

For each pair of a hand-written arm and an llm-compressor recipe (`--pairs`), on the embedded
model (the reference weights + the shipped adapter, merged): the arm applied in-process
(`apply_arm`, as a study runs it) and the recipe's compressed-tensors checkpoint loaded back
decompressed (`flatscore.models.compressed`). Weights: the share of Linear weights exactly
equal, the largest and mean absolute difference, the relative error ||W'-W||/||W|| of each
against the reference (pooled, and the median and largest over the 210 layers). Decisions:
top-1 agreement and mean KL(ref || arm) at the agent-written tokens of the held-out bundled
transcripts, teacher-forced. Needs the quantization environment (`make quant-env`) for
checkpoints not yet in the cache, and the `compressed` extra.

AWQ checkpoints fold their scales into the previous layer; they are compared by their
effective weights: each folded norm's ratio (checkpoint / reference) is multiplied back into
the columns of the linears it feeds (exact), and the up_proj → down_proj fold is undone with
a least-squares estimate of the per-channel scale from up_proj's rows (v_proj → o_proj is
not folded: SmolLM2's grouped-query attention makes their widths differ).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.harness import Table

DEFAULT = (
    "fp8-w8a8:llmc-w8a8-fp8",
    "int8:llmc-w8a16-int8",
    "int4:llmc-w4a16-rtn",
    "int4-g64:llmc-w4a16-rtn",
    "int4-awq:llmc-w4a16-awq",
    "int4-awq-g64:llmc-w4a16-awq",
)
"""hand-written arm : recipe. The `-g64` arms are flatscore's int4 grids at the recipes'
group size (registered here, not shipped): like for like beside the shipped groups of 128."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--model", default="embedded", help="the model spec")
    parser.add_argument(
        "--pairs", nargs="+", default=list(DEFAULT), help="HAND_ARM:RECIPE pairs to compare"
    )
    parser.add_argument("--transcripts", type=int, default=0, help="held-out (0: all)")


@dataclass
class WeightRow:
    equal: float
    max_abs: float
    mean_abs: float
    hand_error: float
    tool_error: float
    hand_layers: tuple[float, float]  # median, max over layers
    tool_layers: tuple[float, float]
    between_layers: tuple[float, float]  # ||H - L|| / ||W||


def _median_max(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return ordered[len(ordered) // 2], ordered[-1]


def effective_weights(model: Any, reference: Any, awq: bool) -> dict[str, Any]:
    """The checkpoint's Linear weights as functions of the reference's inputs: folded norm
    scales multiplied back (exact; a norm left alone has ratio 1), and with `awq` the
    up→down fold undone (least-squares scale per channel)."""
    from flatscore.models.quant.arms import quantizable_linears

    ref_params = dict(reference.named_parameters())
    out = {n: m.weight.detach().clone() for n, m in quantizable_linears(model).items()}
    feeds = {
        "input_layernorm": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
        "post_attention_layernorm": ("mlp.gate_proj", "mlp.up_proj"),
    }
    for name, param in model.named_parameters():
        if not name.endswith(".weight") or ".layers." not in name:
            continue
        block, _, leaf = name[: -len(".weight")].rpartition(".")
        if leaf not in feeds:
            continue
        ratio = param.detach() / ref_params[name].detach()
        for target in feeds[leaf]:
            out[f"{block}.{target}"] *= ratio
    for name in [n for n in out if awq and n.endswith("mlp.up_proj")]:
        ref_up = ref_params[f"{name}.weight"].detach()
        scale = (ref_up * ref_up).sum(1) / (ref_up * out[name]).sum(1)
        out[name] *= scale[:, None]
        down = name.replace("up_proj", "down_proj")
        out[down] /= scale[None, :]
    return out


def compare_weights(ref: dict[str, Any], hand: dict[str, Any], tool: dict[str, Any]) -> WeightRow:
    equal = count = 0
    max_abs = sum_abs = 0.0
    sq = {"hand": 0.0, "tool": 0.0, "ref": 0.0}
    layers: dict[str, list[float]] = {"hand": [], "tool": [], "between": []}
    for name, w in ref.items():
        h, t = hand[name], tool[name]
        diff = (h - t).abs()
        equal += int((h == t).sum())
        count += w.numel()
        max_abs = max(max_abs, float(diff.max()))
        sum_abs += float(diff.sum())
        w_sq = float((w * w).sum())
        h_sq, t_sq = float(((h - w) ** 2).sum()), float(((t - w) ** 2).sum())
        sq["ref"] += w_sq
        sq["hand"] += h_sq
        sq["tool"] += t_sq
        layers["hand"].append((h_sq / w_sq) ** 0.5)
        layers["tool"].append((t_sq / w_sq) ** 0.5)
        layers["between"].append((float((diff * diff).sum()) / w_sq) ** 0.5)
    return WeightRow(
        equal / count,
        max_abs,
        sum_abs / count,
        (sq["hand"] / sq["ref"]) ** 0.5,
        (sq["tool"] / sq["ref"]) ** 0.5,
        _median_max(layers["hand"]),
        _median_max(layers["tool"]),
        _median_max(layers["between"]),
    )


def _register_g64_arms() -> None:
    from functools import partial

    from flatscore.models.quant.arms import register_arm
    from flatscore.models.quant.integer import rtn_groupwise_asymmetric

    g64 = partial(rtn_groupwise_asymmetric, bits=4, group_size=64)
    register_arm("int4-g64", "int4 asymmetric RTN, groups of 64", g64)
    register_arm("int4-awq-g64", "int4 asymmetric, groups of 64, AWQ scales", g64, awq=True)


def run(args: argparse.Namespace) -> list[Table]:
    import torch

    from flatscore.cli.progress_text import checkpoint_step
    from flatscore.models.compressed import load_compressed
    from flatscore.models.embedded import cache_dir, load_model
    from flatscore.models.local import LocalBackend
    from flatscore.models.quant.arms import apply_arm, quantizable_linears
    from flatscore.models.quant.calibration import bundled, token_sequences
    from flatscore.models.quant.evaluate import Tally
    from flatscore.models.quant.recipes import get_recipe
    from flatscore.models.quant.toolchain import make_checkpoint

    torch.set_num_threads(args.threads)
    _register_g64_arms()
    reference = load_model(args.model)
    ref_weights = {
        n: m.weight.detach().clone() for n, m in quantizable_linears(reference.model).items()
    }
    convs = bundled("heldout")[: args.transcripts or None]
    calibration = token_sequences(reference.tokenizer, bundled("calibration"))
    ref_backend = LocalBackend(reference)
    forced = []
    for conv in convs:
        t = ref_backend.transcript(conv.messages, conv.tools)
        targets = [i for i in range(1, len(t.ids)) if t.agent_mask[i]]
        if targets:
            forced.append((t.ids, targets, ref_backend.teacher_force(t.ids, targets).numpy()))
    ref_backend.close()

    def decisions(model: Any, tokenizer: Any) -> Tally:
        from flatscore.models.embedded import LoadedModel

        backend = LocalBackend(LoadedModel(model, tokenizer, "arm", "arm"))
        tally = Tally()
        for ids, targets, ref_logits in forced:
            tally.add(ref_logits, backend.teacher_force(ids, targets).numpy())
        backend.close()
        return tally

    weight_rows, decision_rows = [], []
    for pair in args.pairs:
        twin, name = pair.split(":")
        recipe = get_recipe(name)
        print(f"{name}: checkpoint…", flush=True)
        checkpoint = make_checkpoint(
            recipe, args.model, on_step=lambda step: print(checkpoint_step(step))
        )
        assert checkpoint.path is not None
        tool = load_compressed(Path(checkpoint.path), name)
        print(f"{name}: {twin} in-process…", flush=True)
        hand = load_model(args.model)
        apply_arm(hand.model, twin, calibration, awq_cache=cache_dir() / "awq")
        hand_weights = {n: m.weight.detach() for n, m in quantizable_linears(hand.model).items()}
        awq = "AWQModifier" in recipe.modifiers
        tool_weights = effective_weights(tool.model, reference.model, awq)
        row = compare_weights(ref_weights, hand_weights, tool_weights)
        weight_rows.append(
            [
                f"`{twin}` / `{name}`",
                f"{100 * row.equal:.2f}%",
                f"{row.max_abs:.2e}",
                f"{row.mean_abs:.2e}",
                f"{row.hand_error:.4f} / {row.tool_error:.4f}",
                f"{row.hand_layers[0]:.4f}, {row.hand_layers[1]:.4f}",
                f"{row.tool_layers[0]:.4f}, {row.tool_layers[1]:.4f}",
                f"{row.between_layers[0]:.4f}, {row.between_layers[1]:.4f}",
            ]
        )
        ha = decisions(hand.model, hand.tokenizer).agreement
        ta = decisions(tool.model, tool.tokenizer).agreement
        decision_rows.append(
            [
                f"`{twin}` / `{name}`",
                f"{100 * ha.top1_agreement:.2f}% / {100 * ta.top1_agreement:.2f}%",
                f"{ha.mean_kl:.5f} / {ta.mean_kl:.5f}",
            ]
        )
        del hand, tool
    mean_w = sum(float(w.abs().sum()) for w in ref_weights.values()) / sum(
        w.numel() for w in ref_weights.values()
    )
    weights = Table(
        [
            "hand / llm-compressor",
            "weights equal",
            "max abs(H−L)",
            "mean abs(H−L)",
            "rel. error vs ref (H / L)",
            "per layer H (median, max)",
            "per layer L (median, max)",
            "per layer ‖H−L‖/‖W‖ (median, max)",
        ],
        weight_rows,
        "l" + "r" * 7,
        title="Weights (the 210 decoder Linear layers)",
        notes=[f"Mean abs(W) of the reference's Linear weights: {mean_w:.2e}."],
    )
    positions = forced and sum(len(t) for _, t, _ in forced)
    decisions_table = Table(
        ["hand / llm-compressor", "top-1 agreement with ref", "mean KL(ref ‖ arm)"],
        decision_rows,
        "lrr",
        title="Next-token decisions, teacher-forced",
        notes=[f"{positions} agent-written positions of {len(forced)} held-out transcripts."],
    )
    return [weights, decisions_table]
