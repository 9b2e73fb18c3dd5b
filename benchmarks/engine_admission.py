"""The batch engine's admission under a KV budget, replayed from the demo slice's token counts.

Runs the real `BatchEngine` (its admission, prefix store, eviction and budget) on the token
counts of study v2's archived slice episodes (`flatscore.run.reproduce`: every turn's
prompt and reply lengths, the system turn shared per domain) with a stand-in forward pass:
no model, each pass costs `--pass-s` plus `--token-s` per row (padded to 16 rows), so a
setting's engine time comes out in seconds without running one episode. The defaults are
fitted to `demo-throughput --arms ref` on the 2-core host (920 passes and 11,811 encoded
prompt tokens in 275 CPU-s unbounded; 1,556 and 136,180 in 777 CPU-s at 256 MiB): a
model of where the time goes, not a measurement; `demo-throughput` measures.

Per setting and engine: the modelled engine seconds, forward passes, sequences a pass,
prompt tokens encoded (a conversation whose cached turn was evicted is encoded again) and
the peak KV positions held. `--shared-engine` gives ref and ref-planted one engine with
their summed budget (their weights are the same), as a study without `engine_per_arm`
does. Two engines on two cores run side by side; three share them.
"""

from __future__ import annotations

import argparse
import threading
import time
import types
from typing import Any

from benchmarks.harness import ROOT, Table

ROWS = 16  # `batching.MIN_ROWS`
SYSTEM_TURN = {"retail": 455, "telecom": 575}
"""Tokens of each domain's shared system turn in the slice's prompts (SmolLM2's tokenizer)."""
DOMAIN_IDS = {"retail": 1, "telecom": 2}
KV_BYTES = 46_080  # SmolLM2-135M, fp32: one position of keys and values


def slice_traces(arms: tuple[str, ...]) -> dict[str, list[tuple[str, list[tuple[int, int]]]]]:
    """Per arm: each slice episode's domain and its turns' (prompt, reply) token counts."""
    from flatscore.run.reproduce import V2_ARCHIVE, archive_episodes, slice_task_ids

    ids = set(slice_task_ids())
    out: dict[str, list[tuple[str, list[tuple[int, int]]]]] = {a: [] for a in arms}
    for ep in archive_episodes(ROOT / V2_ARCHIVE):
        if ep.trial == 0 and ep.task_id in ids and ep.arm in out:
            turns = [
                (m.usage.prompt_tokens, m.usage.completion_tokens)
                for m in ep.messages
                if m.role == "assistant" and m.usage is not None
            ]
            out[ep.arm].append((ep.domain, turns))
    return out


def replay(
    episodes: list[tuple[str, list[tuple[int, int]]]],
    budget: int | None,
    *,
    max_batch: int,
    pass_s: float,
    token_s: float,
) -> dict[str, float]:
    """Every episode's turns through one engine at once; the engine's modelled seconds."""
    from flatscore.models import batching
    from flatscore.models.batching import BatchEngine, Request

    clock = [0.0]

    def forward(model: Any, kvs: Any, feeds: Any, min_rows: int = ROWS, stop: Any = None) -> Any:
        import torch

        rows = sum(len(f) for f in feeds)
        for kv, f in zip(kvs, feeds, strict=True):
            t = torch.zeros((1, 1, len(f), 1))
            kv.write(0, t, t)
            kv.advance(len(f))
        spent = pass_s + token_s * max(rows, min_rows)
        clock[0] += spent
        time.sleep(spent / 40)  # episodes answer within a pass, as they do for real
        return torch.zeros((len(feeds), 1))

    config = types.SimpleNamespace(num_hidden_layers=1, _attn_implementation=batching.ATTENTION)
    saved = batching.packed_forward
    batching.packed_forward = forward
    try:
        engine = BatchEngine(
            types.SimpleNamespace(config=config), max_batch=max_batch, kv_budget=budget
        )

        def talk(k: int, domain: str, turns: list[tuple[int, int]]) -> None:
            system = [DOMAIN_IDS[domain] * 10**6 + i for i in range(SYSTEM_TURN[domain])]
            tokens = system + [10**9 + k * 10**6 + i for i in range(10**5)]
            for prompt, reply in turns:
                left = [reply]

                def step(
                    _: Any, prompt: int = prompt, reply: int = reply, left: list[int] = left
                ) -> int | None:
                    left[0] -= 1
                    return tokens[prompt + reply - left[0] - 1] if left[0] > 0 else None

                engine.run(
                    Request(
                        ids=tokens[:prompt],
                        step=step,
                        prefix_len=len(system),
                        max_new=256,
                    )
                )

        threads = [
            threading.Thread(target=talk, args=(k, d, t)) for k, (d, t) in enumerate(episodes)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        engine.close()
    finally:
        batching.packed_forward = saved
    return {
        "seconds": clock[0],
        "passes": engine.steps,
        "per_pass": engine.sequence_passes / max(1, engine.steps),
        "encoded": engine.encoded_tokens,
        "peak": engine.peak_kv_tokens,
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kv-memory-mb", default="0,256", help="per arm; 0: no bound")
    parser.add_argument("--shared-engine", action="store_true")
    parser.add_argument("--pass-s", type=float, default=0.22)
    parser.add_argument("--token-s", type=float, default=0.0027)


def run(args: argparse.Namespace) -> list[Table]:
    traces = slice_traces(("ref", "ref-planted", "int4-awq"))
    if args.shared_engine:
        engines = {"ref + ref-planted": (traces["ref"] + traces["ref-planted"], 2)}
        engines["int4-awq"] = (traces["int4-awq"], 1)
    else:
        engines = {arm: (eps, 1) for arm, eps in traces.items()}
    rows: list[list[object]] = []
    for text in args.kv_memory_mb.split(","):
        mb = float(text)
        per_arm = int(mb * 2**20) // KV_BYTES if mb else None
        seconds = []
        for name, (episodes, arms) in engines.items():
            r = replay(
                episodes,
                per_arm * arms if per_arm else None,
                max_batch=16 * arms,
                pass_s=args.pass_s,
                token_s=args.token_s,
            )
            seconds.append(r["seconds"])
            print(f"{mb:g} MiB, {name}: {r}", flush=True)
            rows.append(
                [
                    f"{mb:g}" if mb else "no bound",
                    name,
                    f"{r['seconds']:,.0f}",
                    f"{r['passes']:,.0f}",
                    f"{r['per_pass']:.2f}",
                    f"{r['encoded']:,.0f}",
                    f"{r['peak']:,.0f}",
                ]
            )
        two_cores = max(max(seconds), sum(seconds) / 2)
        rows.append([f"{mb:g}" if mb else "no bound", "the slice on 2 cores", f"{two_cores:,.0f}"])
    header = [
        "KV MiB an arm",
        "engine",
        "modelled s",
        "passes",
        "sequences a pass",
        "prompt tokens encoded",
        "peak KV positions",
    ]
    return [Table(header, rows, "llrrrrr", title="The slice's 45 episodes, replayed")]
