"""Episodes per hour of the embedded study's arms, and the study's projected duration
(docs/embedded-study.md, "How long it takes").

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/embedded_study_timing.py --arms ref,int4 \\
        --tasks cancel_12,exchange_10,cancel_two_08,suspended_10,refuel_08,airplane_08

Runs examples/embedded-study.yaml itself (its sampling, budget, user and seeds) restricted
to the given arms and tasks, one trial, one episode at a time, one torch thread, one
(arm, domain) after the other. The machine is shared, so besides wall time it measures the
process's CPU time per (arm, domain), with the arm's weights loaded beforehand (loading is
reported apart): with one thread, CPU seconds are what an episode costs on a core of its
own. It prints CPU and wall seconds per episode, episodes per hour, and the projection to
the whole study (114 tasks × trials × 2 domains per arm) for 1 and 2 workers.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import Counter
from pathlib import Path

from flatscore.domains import get_domain
from flatscore.executors.base import get_backend
from flatscore.store import read_episodes
from flatscore.study import Study, load_study
from flatscore.study_run import plan_study, run_study

STUDY = Path(__file__).resolve().parents[1] / "examples" / "embedded-study.yaml"


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
    rows: list[dict[str, object]] = []
    for arm in arms:
        for domain in study.domains:
            ids = [t for t in tasks if t in {x.id for x in get_domain(domain).tasks("test")}]
            if not ids:
                continue
            small = _restrict(study, arm, domain, ids, out / f"{arm}-{domain}")
            backend = plan_study(small).runs[0].recipe.backend
            assert backend is not None  # an in-process model
            cpu, wall = time.process_time(), time.perf_counter()
            get_backend(backend)  # cached per process: the run below reuses it
            load_cpu, load_wall = time.process_time() - cpu, time.perf_counter() - wall
            cpu, wall = time.process_time(), time.perf_counter()
            run_study(small, resume=False, report=False, progress=False)
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            episodes = [
                e for p in (small.output_dir / "runs").glob("*.jsonl") for e in read_episodes(p)
            ]
            rows.append(
                {
                    "arm": arm,
                    "domain": domain,
                    "episodes": len(episodes),
                    "cpu_s": round(cpu, 1),
                    "wall_s": round(wall, 1),
                    "load_cpu_s": round(load_cpu, 1),
                    "load_wall_s": round(load_wall, 1),
                    "succeeded": sum(e.succeeded for e in episodes),
                    "messages": sum(len(e.messages) for e in episodes),
                    "completion_tokens": sum(e.usage.completion_tokens for e in episodes),
                    "terminations": dict(Counter(e.termination_reason.value for e in episodes)),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    return rows


def project(study: Study, rows: list[dict[str, object]]) -> None:
    per_cell = 114 * study.trials
    print(
        f"{'arm':<9} {'domain':<8} {'n':>2} {'cpu s/ep':>8} {'wall s/ep':>9} {'ep/h (1 core)':>13}"
    )
    per_arm: dict[str, float] = {}
    for row in rows:
        n = int(str(row["episodes"]))
        cpu = float(str(row["cpu_s"])) / n
        wall = float(str(row["wall_s"])) / n
        print(
            f"{row['arm']!s:<9} {row['domain']!s:<8} {n:>2} {cpu:>8.1f} {wall:>9.1f}"
            f" {3600 / cpu:>13.1f}"
        )
        per_arm[str(row["arm"])] = per_arm.get(str(row["arm"]), 0.0) + cpu * per_cell
    for arm, seconds in per_arm.items():
        print(f"{arm}: {per_cell} episodes per domain -> {seconds / 3600:.1f} CPU-hours per arm")
    print(statistics.mean(per_arm.values()) / 3600, "CPU-hours per arm on average (measured arms)")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--study", type=Path, default=STUDY)
    parser.add_argument("--arms", default="ref,int4")
    parser.add_argument("--tasks", default="cancel_12,exchange_10,suspended_10,refuel_08")
    parser.add_argument("--out", type=Path, default=Path("/tmp/embedded-study-timing"))
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    study = load_study(args.study)
    rows = measure(study, args.arms.split(","), args.tasks.split(","), args.out)
    (args.out / "timing.json").write_text(json.dumps(rows, indent=1) + "\n")
    project(study, rows)


if __name__ == "__main__":
    main()
