"""How fast is `analyze` at paper scale? 10 cells × 3 arms × 456 episodes (114 tasks × 4
trials), ~10 agent tool calls per episode, 5,000 paired task-bootstrap resamples.

Run: `.venv/bin/python benchmarks/analysis_speed.py [--bootstrap 5000]`

Reports wall time for reading the episodes into per-episode facts plus all statistics, and,
as an in-process baseline, the vectorized bootstrap of one comparison against a plain
Python loop over resamples doing the same work.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", type=int, default=5000)
    parser.add_argument("--cells", type=int, default=10)
    args = parser.parse_args()

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
    print(
        f"analyze: {len(result.cells)} cells, {comparisons} comparisons, {args.bootstrap} "
        f"resamples, 11 budgets: {t_all:.2f} s ({c_all:.2f} s of CPU, every thread: on a "
        "loaded machine the wall time is the load's; OpenBLAS threads busy-wait under "
        "contention, so compare with OPENBLAS_NUM_THREADS=1)"
    )

    rules = load_rules()
    t0 = time.perf_counter()
    for e in episodes:
        episode_facts(e, rules)
    t_facts = time.perf_counter() - t0
    print(f"  of which reading messages into per-episode facts: {t_facts:.2f} s")

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
    print(
        f"one statistic by Python loop over {args.bootstrap} resamples: {t_loop:.3f} s; "
        f"40 statistics vectorized: {t_vec:.4f} s ({t_loop / max(t_vec, 1e-9):.0f}× faster "
        "for 40× the work)"
    )


if __name__ == "__main__":
    main()
