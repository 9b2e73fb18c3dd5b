from __future__ import annotations

from flatscore.models.quant.calibration import bundled, bundled_calibration


def test_bundled_transcripts_split_into_disjoint_calibration_and_heldout() -> None:
    cal, held = bundled("calibration"), bundled("heldout")
    assert len(cal) >= 4 and len(held) >= 3
    assert not {c.id for c in cal} & {c.id for c in held}
    assert bundled_calibration() == cal
    for conv in cal + held:
        assert conv.tools and conv.messages[0].role == "system"
        assert any(m.tool_calls for m in conv.messages)
        names = {t["function"]["name"] for t in conv.tools}
        called = {c.name for m in conv.messages for c in m.tool_calls}
        assert called - names <= {"track_order"}  # one planted unknown-tool call, held out
