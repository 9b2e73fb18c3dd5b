"""What the margins were computed on (`report.margins_text`, margins.json's `notes`): known
answers, the text `flatscore margins` wrote before the words moved here."""

from __future__ import annotations

from flatscore.report.margins_text import margins_notes

DESCRIPTION = "SmolLM2-135M-Instruct + flatscore adapter (embedded)"


def test_the_transcripts_and_the_references_source() -> None:
    assert margins_notes(3, "ref", "ref", DESCRIPTION, dequantized_reference=False) == [
        "transcripts: 3 episode(s) of arm 'ref', rendered in the local chat format; reference "
        "logits from in-process arm 'ref' of SmolLM2-135M-Instruct + flatscore adapter "
        "(embedded)"
    ]


def test_the_embedded_reference_is_said_to_be_dequantized() -> None:
    notes = margins_notes(1, "int8", "ref", DESCRIPTION, dequantized_reference=True)
    assert notes[0].startswith("transcripts: 1 episode(s) of arm 'int8', ")
    assert notes[1:] == [
        "the embedded reference is itself dequantized from Q4_1 (4-bit, blocks of 32): arms "
        "quantize an already-quantized model"
    ]
