"""What each embedded arm costs to serve in-process.

The weight footprint of the arm's format, the process's resident memory, and prefill /
decode speed on one real agent turn.

For each arm the embedded model is loaded afresh, the arm applied (AWQ scales from the
cache), and one held-out agent prompt generated greedily (`--tokens` tokens, prefix cache
cold) `--repeats` times; the median turn is reported. The in-process arms are fake-quantized
(weights rounded, kept in fp32), so their speed is the reference's by construction: the
figures show what the local backend measures, not what a real low-bit kernel would gain.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics

import torch

from benchmarks.harness import Table
from flatscore.models.base import Sampling
from flatscore.models.footprint import peak_rss_bytes
from flatscore.models.local import LocalBackend
from flatscore.models.quant.calibration import bundled

ARMS = ["ref", "fp8", "int8", "int4-awq", "int4"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--arms", nargs="+", default=ARMS)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", 1)))


def run(args: argparse.Namespace) -> list[Table]:
    torch.set_num_threads(args.threads)
    conv = bundled("heldout")[0]
    turn = next(i for i, m in enumerate(conv.messages) if m.role == "assistant" and i > 2)
    messages, tools = conv.messages[:turn], conv.tools
    rows = []
    for arm in args.arms:
        backend = LocalBackend.from_spec("embedded", arm=arm)
        turns = []
        for _ in range(args.repeats):
            backend.clear_cache()  # cold prefix cache: every repeat encodes the whole prompt
            gen = backend.generate(messages, tools, Sampling(max_tokens=args.tokens))
            t = gen.message.timing
            assert t is not None and t.prefill_s and t.decode_s and t.encoded_tokens
            turns.append(
                (t.encoded_tokens / t.prefill_s, gen.usage.completion_tokens / t.decode_s, gen)
            )
        s = backend.serving()
        prefill = statistics.median(x[0] for x in turns)
        decode = statistics.median(x[1] for x in turns)
        rows.append(
            {
                "arm": arm,
                "parameters": s.parameters,
                "weight_MB": round((s.weight_bytes or 0) / 1e6, 1),
                "bits_per_parameter": s.bits_per_parameter,
                "resident_weight_MB": round((s.resident_weight_bytes or 0) / 1e6, 1),
                "peak_rss_MB": round(peak_rss_bytes() / 1e6),
                "prompt_tokens": turns[0][2].usage.prompt_tokens,
                "prefill_tokens_per_s": round(prefill, 1),
                "decode_tokens_per_s": round(decode, 2),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
        backend.close()
        del backend
    return [Table(list(rows[0]), [list(r.values()) for r in rows], "lr")]
