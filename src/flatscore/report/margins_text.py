"""What the margins were computed on, in words: margins.json's `notes` (`flatscore margins`).
The run keeps the facts (the transcripts' arm and count, the reference arm, the model's
description, whether the embedded reference is itself dequantized); these are its words."""

from __future__ import annotations


def margins_notes(
    episodes: int,
    transcripts_arm: str,
    reference: str,
    model_description: str,
    *,
    dequantized_reference: bool,
) -> list[str]:
    """The transcripts and the reference logits' source; with `dequantized_reference`, that
    the reference is already quantized."""
    notes = [
        f"transcripts: {episodes} episode(s) of arm {transcripts_arm!r}, rendered in the local "
        f"chat format; reference logits from in-process arm {reference!r} of "
        f"{model_description}",
    ]
    if dequantized_reference:
        notes.append(
            "the embedded reference is itself dequantized from Q4_1 (4-bit, blocks of 32): "
            "arms quantize an already-quantized model"
        )
    return notes
