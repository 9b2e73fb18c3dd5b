"""flatscore.report.server_text: the line a run prints as it starts a server (known
answers: each kind names its weights as the spec does)."""

from __future__ import annotations

from flatscore.report.server_text import starting_line
from flatscore.study.server import ServerSpec


def test_the_start_line_names_kind_arm_and_weights() -> None:
    llama = ServerSpec(kind="llama-cpp", model="/m/q4.gguf")
    assert (
        starting_line("smol/q4", llama) == "starting the llama-cpp server for smol/q4 (/m/q4.gguf)"
    )
    vllm = ServerSpec(kind="vllm", checkpoint="org/ckpt")
    assert starting_line("m/fp8", vllm) == "starting the vllm server for m/fp8 (org/ckpt)"
    served = ServerSpec(kind="flatscore", model="embedded", quant="int4")
    assert (
        starting_line("e@int4", served)
        == "starting the flatscore server for e@int4 (embedded@int4)"
    )
