"""How fast `analyze` is at paper scale.

10 cells × 3 arms × 456 episodes (114 tasks × 4 trials), ~10 agent tool calls per episode,
5,000 paired task-bootstrap resamples, 11 budgets. Synthetic episodes (the quantized arms
fail more and invent names). Reports the wall and CPU time of `analyze()` end to end and of
reading the episodes into per-episode facts, and, as an in-process baseline, one statistic
bootstrapped by a plain Python loop over resamples against all 40 statistics vectorized.
On a shared machine compare with OPENBLAS_NUM_THREADS=1 (OpenBLAS threads busy-wait under
contention).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from benchmarks.harness import Table
from flatscore.analysis.analyze import AnalysisOptions, analyze
from flatscore.analysis.channels import load_rules
from flatscore.analysis.facts import episode_facts
from flatscore.episode import (
    Episode,
    ErrorBudget,
    Message,
    TerminationReason,
    ToolCall,
    ToolLists,
    ToolResult,
)

AGENT_TOOLS = [f"tool_{i}" for i in range(15)]
USER_TOOLS = [f"user_tool_{i}" for i in range(10)]
ARMS = {"bf16": 1.0, "fp8": 1.2, "int4": 2.0}  # failure-rate multiplier per arm


def make_episode(rng: np.random.Generator, model: str, arm: str, task: int, trial: int) -> Episode:
    rate = 0.08 * ARMS[arm]
    messages = [Message(role="user", content="hi")]
    for i in range(int(rng.integers(5, 16))):
        fail = rng.random() < rate
        name = AGENT_TOOLS[int(rng.integers(15))]
        if fail and rng.random() < 0.6:
            name = (
                USER_TOOLS[int(rng.integers(10))]
                if rng.random() < 0.5
                else f"made_up_{rng.integers(30)}"
            )
        messages.append(
            Message(role="assistant", tool_calls=[ToolCall(id=f"c{i}", name=name, arguments={})])
        )
        text = "Error: User not found" if fail else "ok"
        messages.append(
            Message(role="tool", tool_result=ToolResult(call_id=f"c{i}", error=fail, text=text))
        )
    messages.append(Message(role="assistant", content="done"))
    return Episode(
        episode_id=f"{model}-{arm}-{task}-{trial}",
        study="bench",
        arm=arm,
        model=model,
        domain="retail",
        task_id=f"task_{task}",
        trial=trial,
        messages=messages,
        termination_reason=TerminationReason.USER_STOP,
        reward=float(rng.random() < 0.6),
        error_budget=ErrorBudget(max_errors=10),
        tools=ToolLists(agent=AGENT_TOOLS, user=USER_TOOLS, source="run"),
    )


def naive_gap_bootstrap(
    ref: np.ndarray, arm: np.ndarray, n_boot: int, rng: np.random.Generator
) -> np.ndarray:
    """The baseline: one Python iteration per resample, one Gap(K) per resample."""
    tasks = ref.shape[0]
    out = np.empty(n_boot)
    for b in range(n_boot):
        idx = rng.integers(0, tasks, tasks)
        out[b] = ref[idx].mean() - arm[idx].mean()
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap", type=int, default=5000)
    parser.add_argument("--cells", type=int, default=10)


def run(args: argparse.Namespace) -> list[Table]:
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    episodes = [
        make_episode(rng, f"model_{c}", arm, task, trial)
        for c in range(args.cells)
        for arm in ARMS
        for task in range(114)
        for trial in range(4)
    ]
    t_build = time.perf_counter() - t0
    calls = sum(len(e.messages) for e in episodes) // 2
    print(f"built {len(episodes)} episodes (~{calls} agent calls) in {t_build:.1f} s")

    t0, c0 = time.perf_counter(), time.process_time()
    result = analyze(episodes, AnalysisOptions(bootstrap=args.bootstrap, budgets=list(range(11))))
    t_all, c_all = time.perf_counter() - t0, time.process_time() - c0
    comparisons = sum(len(c.comparisons) for c in result.cells)

    rules = load_rules()
    t0 = time.perf_counter()
    for e in episodes:
        episode_facts(e, rules)
    t_facts = time.perf_counter() - t0

    # Baseline ratio: a Python loop over resamples for ONE statistic of ONE comparison,
    # against the vectorized (resamples × tasks) @ (tasks × stats) product for all of them.
    ref = rng.random((114, 4)).mean(axis=1)
    arm = rng.random((114, 4)).mean(axis=1)
    n = min(args.bootstrap, 2000)
    t0 = time.perf_counter()
    naive_gap_bootstrap(ref, arm, n, rng)
    t_loop = (time.perf_counter() - t0) * args.bootstrap / n
    w = rng.multinomial(114, np.full(114, 1 / 114), size=args.bootstrap).astype(float)
    sums = rng.random((114, 40))
    t0 = time.perf_counter()
    _ = w @ sums
    t_vec = time.perf_counter() - t0
    speed = t_loop / max(t_vec, 1e-9)
    return [
        Table(
            ["step", "wall s", "CPU s (every thread)"],
            [
                [f"building the {len(episodes):,} episodes (not analysis)", f"{t_build:.1f}", ""],
                [
                    f"`analyze()`: {len(result.cells)} cells, {comparisons} comparisons × "
                    f"{args.bootstrap:,} resamples, 11 budgets",
                    f"{t_all:.2f}",
                    f"{c_all:.2f}",
                ],
                ["of which reading messages into per-episode facts", f"{t_facts:.2f}", ""],
                [
                    f"one statistic, Python loop over {args.bootstrap:,} resamples (baseline)",
                    f"{t_loop:.3f}",
                    "",
                ],
                [
                    f"40 statistics vectorized ({speed:.0f}× faster for 40× the work)",
                    f"{t_vec:.4f}",
                    "",
                ],
            ],
            "lr",
        )
    ]
