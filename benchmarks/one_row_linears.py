"""One decode step's linear layers for one row, by weight format.

What a lone sequence pays per token for SmolLM2-135M's shapes (30 layers of
q/k/v/o/gate/up/down + the 49,152-row output head), random weights, alternating rounds in
one process, best of each. Formats: fp32 (`nn.functional.linear`, MKL's sgemm), bf16 and
fp16 (torch's CPU kernels), int8 per row (`_weight_int8pack_mm`), int4 in groups of 32
(`_weight_int4pack_mm_for_cpu`, the layout of a Q4_1 file), and FBGEMM's dynamic int8 linear
(int8 weights per row, the row quantized to 8 bits at run time, as llama.cpp multiplies:
`quantized.linear_dynamic`, an API torch marks deprecated). Also the process's read
bandwidth (a sum over 200 MB), for the bytes-per-token bound.
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Callable

import torch
from torch.nn.functional import linear

from benchmarks.harness import Table, alternate, ratio, timed

LAYER = [(576, 576), (192, 576), (192, 576), (576, 576), (1536, 576), (1536, 576), (576, 1536)]
SHAPES = LAYER * 30 + [(49152, 576)]


def dense(dtype: torch.dtype) -> Callable[[], None]:
    weights = [torch.randn(o, i).mul_(0.05).to(dtype) for o, i in SHAPES]
    rows = {k: torch.randn(1, k).to(dtype) for k in (576, 1536)}

    def step() -> None:
        for w in weights:
            linear(rows[w.shape[1]], w)

    return step


def int8() -> Callable[[], None]:
    weights = [
        (torch.randint(-127, 128, (o, i), dtype=torch.int8), torch.rand(o)) for o, i in SHAPES
    ]
    rows = {k: torch.randn(1, k) for k in (576, 1536)}

    def step() -> None:
        for q, scale in weights:
            torch.ops.aten._weight_int8pack_mm(rows[q.shape[1]], q, scale)

    return step


def int4() -> Callable[[], None]:
    pack = torch.ops.aten._convert_weight_to_int4pack_for_cpu
    weights = [
        (pack(torch.randint(0, 16, (o, i), dtype=torch.int32), 1), torch.rand(i // 32, o, 2), i)
        for o, i in SHAPES
    ]
    rows = {k: torch.randn(1, k) for k in (576, 1536)}

    def step() -> None:
        for packed, scales, k in weights:
            torch.ops.aten._weight_int4pack_mm_for_cpu(rows[k], packed, 32, scales)

    return step


def int8_dynamic() -> Callable[[], None]:
    with warnings.catch_warnings():  # torch's deprecation notice for quantized tensors
        warnings.simplefilter("ignore", UserWarning)
        packed = []
        for o, i in SHAPES:
            w = torch.randn(o, i).mul_(0.05)
            scale = (w.abs().amax(1) / 127).double()
            zero = torch.zeros(o, dtype=torch.long)
            qw = torch.quantize_per_channel(w, scale, zero, 0, torch.qint8)
            packed.append((torch.ops.quantized.linear_prepack(qw, None), i))
    rows = {k: torch.randn(1, k) for k in (576, 1536)}

    def step() -> None:
        for pack, k in packed:
            torch.ops.quantized.linear_dynamic(rows[k], pack, True)

    return step


def seconds_of(step: Callable[[], None]) -> Callable[[], float]:
    return lambda: timed(step)[0]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rounds", type=int, default=6)


def run(args: argparse.Namespace) -> list[Table]:
    torch.set_num_threads(1)
    runs = {
        "fp32": dense(torch.float32),
        "bf16": dense(torch.bfloat16),
        "fp16": dense(torch.float16),
        "int8": int8(),
        "int4 (groups of 32)": int4(),
        "int8 weights, 8-bit row (FBGEMM dynamic)": int8_dynamic(),
    }
    seconds = alternate(
        {name: seconds_of(step) for name, step in runs.items()},
        args.rounds,
        reverse=False,
    )
    best = {name: min(s) for name, s in seconds.items()}
    params = sum(o * i for o, i in SHAPES)
    rows: list[list[object]] = [
        [n, f"{s * 1e3:.1f}", ratio(best["fp32"], s)] for n, s in best.items()
    ]
    data = torch.randn(50_000_000)
    start = time.perf_counter()
    for _ in range(5):
        data.sum()
    rate = 5 * data.nbytes / (time.perf_counter() - start) / 1e9
    title = f"{params / 1e6:.1f}M weights per token; best of {args.rounds} alternating rounds"
    note = f"Read bandwidth (a sum over 200 MB): {rate:.1f} GB/s."
    return [Table(["format", "ms per token", "vs fp32"], rows, "lr", title=title, notes=[note])]
