"""Episodes per hour of the embedded study's arms and the study's projected duration.

Runs examples/embedded-study.yaml itself (its sampling, budget, user and seeds) restricted
to the given arms and tasks, one trial, one episode at a time, one torch thread. The
machine is shared, so besides wall time it measures the process's CPU time per episode
(each task a run of its own, the arm's weights loaded beforehand and reported apart): with
one thread, CPU seconds are what an episode costs on a core of its own. It prints one JSON
row per episode as it goes; its table: CPU seconds per episode, episodes per core-hour and
the projection to the arm's share of the study (docs/embedded-study.md, "How long it
takes").
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from benchmarks.harness import ROOT, Table
from flatscore.domains import get_domain
from flatscore.models.shared import get_backend
from flatscore.run.driver import plan_study, run_study
from flatscore.run.study import load_study
from flatscore.store.jsonl import read_episodes
from flatscore.study import Study

STUDY = ROOT / "examples" / "embedded-study.yaml"


def _restrict(study: Study, arm: str, domain: str, tasks: list[str], out: Path) -> Study:
    model = study.models[0]
    return study.model_copy(
        update={
            "models": [model.model_copy(update={"arms": {arm: model.arms[arm]}})],
            "domains": [domain],
            "task_ids": tasks,
            "trials": 1,
            "concurrency": 1,
            "output": str(out.resolve()),
        }
    )


def measure(study: Study, arms: list[str], tasks: list[str], out: Path) -> list[dict[str, object]]:
    """One row per episode (each task its own run, so a stopped measurement keeps its rows)."""
    domain_of = {t.id: d for d in study.domains for t in get_domain(d).tasks("test")}
    rows: list[dict[str, object]] = []
    for arm in arms:
        for task in tasks:
            domain = domain_of[task]
            small = _restrict(study, arm, domain, [task], out / f"{arm}-{domain}-{task}")
            backend = plan_study(small).runs[0].recipe.backend
            assert backend is not None  # an in-process model
            cpu, wall = time.process_time(), time.perf_counter()
            get_backend(backend)  # cached per process: the run below reuses it
            load_cpu, load_wall = time.process_time() - cpu, time.perf_counter() - wall
            cpu, wall = time.process_time(), time.perf_counter()
            run_study(small, resume=False, report=False, progress=False)
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            (episode,) = [
                e for p in (small.output_dir / "runs").glob("*.jsonl") for e in read_episodes(p)
            ]
            rows.append(
                {
                    "arm": arm,
                    "domain": domain,
                    "task": task,
                    "cpu_s": round(cpu, 1),
                    "wall_s": round(wall, 1),
                    "load_cpu_s": round(load_cpu, 1),
                    "load_wall_s": round(load_wall, 1),
                    "succeeded": episode.succeeded,
                    "termination": episode.termination_reason.value,
                    "messages": len(episode.messages),
                    "failed_calls": episode.metadata.get("failed_calls"),
                    "prompt_tokens": episode.usage.prompt_tokens,
                    "completion_tokens": episode.usage.completion_tokens,
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    return rows


def project(study: Study, rows: list[dict[str, object]]) -> Table:
    """CPU seconds per episode per arm (the mean over its measured tasks) × the study's
    episodes per arm (114 × trials × domains)."""
    per_arm_episodes = 114 * study.trials * len(study.domains)
    out: list[list[object]] = []
    for arm in sorted({str(r["arm"]) for r in rows}):
        cpu = [float(str(r["cpu_s"])) for r in rows if r["arm"] == arm]
        wall = [float(str(r["wall_s"])) for r in rows if r["arm"] == arm]
        mean, mean_wall = statistics.mean(cpu), statistics.mean(wall)
        out.append(
            [
                arm,
                len(cpu),
                f"{mean:.0f}",
                f"{mean_wall:.0f}",
                f"{3600 / mean:.1f}",
                f"{per_arm_episodes * mean / 3600:.1f} ({per_arm_episodes} episodes)",
            ]
        )
    header = [
        "arm",
        "episodes measured",
        "CPU-s / episode",
        "wall s / episode",
        "episodes per core-hour",
        "core-hours for its share of the study",
    ]
    return Table(header, out, "lr")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--study", type=Path, default=STUDY)
    parser.add_argument("--arms", default="ref,int4")
    parser.add_argument("--tasks", default="cancel_12,suspended_10,exchange_10,refuel_08")
    parser.add_argument("--out", type=Path, default=Path("/tmp/embedded-study-timing"))


def run(args: argparse.Namespace) -> list[Table]:
    import torch

    torch.set_num_threads(1)
    study = load_study(args.study)
    rows = measure(study, args.arms.split(","), args.tasks.split(","), args.out)
    (args.out / "timing.json").write_text(json.dumps(rows, indent=1) + "\n")
    return [project(study, rows)]
