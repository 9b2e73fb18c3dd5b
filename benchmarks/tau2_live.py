"""τ²-bench run live by flatscore: what it costs besides the model.

(a) **writer**: flatscore converts each finished simulation and appends one fsynced JSONL
    line; τ² 26.3's `run_tasks` re-reads and re-writes its whole results file after every
    simulation (`_save`, copied below). Both write the same simulations (a τ² telecom
    simulation produced by τ²'s own code, with its `raw_data`, messages tripled to ~40 —
    about a real retail/telecom episode). Totals are measured up to `--full-up-to`; at
    larger sizes τ²'s total is extrapolated from its per-append cost measured at that size
    (cost linear in the file size, so the total is cost(n)·n/2; checked against the full
    measurement at 100).
(b) **prefix caching**: one τ² retail episode, τ²'s LLM agent against `flatscore serve`
    (the embedded model, in-process uvicorn on loopback) with the backend's KV reuse on and
    off; the user is the scripted endpoint (`tests/scripted_endpoint.py`), so only the
    agent's time differs.
(c) **overhead**: τ² episodes through `run_study` against an endpoint that takes a
    fixed time per request (the scripted endpoint): wall time vs the time the endpoint spent,
    split into flatscore's share (queue, conversion, writing) and τ²'s (environment,
    orchestrator, evaluator, litellm).
Needs the `tau2` extra; (b) also the `local` extra.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import ROOT, Table, tests_on_path

FIXTURE = ROOT / "tests" / "fixtures" / "tau2" / "v0.2" / "telecom.json"


# --- (a) writers -------------------------------------------------------------------------------


def _simulation() -> tuple[dict[str, Any], dict[str, Any]]:
    data = json.loads(FIXTURE.read_text())
    sim = data["simulations"][0]
    sim["messages"] = sim["messages"] * 3
    header = {"timestamp": data.get("timestamp"), "info": data["info"], "tasks": data["tasks"]}
    return header, sim


def tau2_save(save_to: Path, simulation: dict[str, Any]) -> None:
    """τ² 26.3, `tau2.run.run_tasks._save` (the lock aside): the whole file, every time."""
    with open(save_to) as fp:
        ckpt = json.load(fp)
    ckpt["simulations"].append(simulation)
    with open(save_to, "w") as fp:
        json.dump(ckpt, fp, indent=2)


def _flatscore_writer(n: int, sim: dict[str, Any], out: Path) -> float:
    from flatscore.episode import ToolLists
    from flatscore.formats.tau2 import episode_from_simulation
    from flatscore.store.jsonl import EpisodeWriter

    tools = ToolLists(agent=["get_customer_by_phone"], user=["toggle_roaming"], source="run")
    t0 = time.perf_counter()
    with EpisodeWriter(out) as writer:
        for i in range(n):
            s = dict(sim, id=f"sim-{i}", task_id=f"task-{i}")
            episode = episode_from_simulation(
                s,
                domain="telecom",
                arm="bf16",
                model="m",
                study="bench",
                max_errors=10,
                tools=tools,
                source_format="tau2-live",
                source_file=str(out),
                index=i,
            )
            writer.write(episode)
    return time.perf_counter() - t0


def _tau2_writer(n: int, header: dict[str, Any], sim: dict[str, Any], out: Path) -> float:
    out.write_text(json.dumps({**header, "simulations": []}, indent=2))
    t0 = time.perf_counter()
    for i in range(n):
        tau2_save(out, dict(sim, id=f"sim-{i}", task_id=f"task-{i}"))
    return time.perf_counter() - t0


def _tau2_append_cost(n: int, header: dict[str, Any], sim: dict[str, Any], out: Path) -> float:
    """Seconds for τ²'s writer to add episode n+1 to a file already holding n."""
    sims = [dict(sim, id=f"sim-{i}", task_id=f"task-{i}") for i in range(n)]
    out.write_text(json.dumps({**header, "simulations": sims}, indent=2))
    times = []
    for i in range(3):
        t0 = time.perf_counter()
        tau2_save(out, dict(sim, id=f"extra-{i}"))
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def part_a(sizes: list[int], full_up_to: int) -> Table:
    header, sim = _simulation()
    size_kb = len(json.dumps(sim, indent=2)) / 1024
    title = f"(a) writers: one simulation = {len(sim['messages'])} messages, {size_kb:.0f} KB"
    columns = ["episodes", "flatscore append (s)", "τ² rewrite (s)", "ratio", "τ² file"]
    rows: list[list[object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            ours = _flatscore_writer(n, sim, Path(tmp) / f"run-{n}.jsonl")
            if n <= full_up_to:
                theirs = _tau2_writer(n, header, sim, Path(tmp) / f"tau2-{n}.json")
                mb = (Path(tmp) / f"tau2-{n}.json").stat().st_size / 2**20
                est = _tau2_append_cost(n, header, sim, Path(tmp) / f"tau2-est-{n}.json") * n / 2
                note = f"{mb:.0f} MB; measured (the estimate below would say {est:.1f} s)"
            else:  # linear per-append cost -> quadratic total, integrated
                last = _tau2_append_cost(n, header, sim, Path(tmp) / f"tau2-{n}.json")
                theirs = last * n / 2
                mb = (Path(tmp) / f"tau2-{n}.json").stat().st_size / 2**20
                note = f"{mb:.0f} MB; est. from {last:.2f} s/append at {n}"
            rows.append([f"{n:,}", f"{ours:.2f}", f"{theirs:.1f}", f"{theirs / ours:.0f}×", note])
            print(*rows[-1], flush=True)
    return Table(columns, rows, "r", title=title)


# --- (b) prefix caching ------------------------------------------------------------------------


def _serve_in_thread(app: Any) -> tuple[Any, str]:
    import uvicorn

    from flatscore.run.tau2.endpoints import free_port

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    return server, f"http://127.0.0.1:{port}/v1"


def part_b(max_steps: int, max_tokens: int) -> Table:
    import torch

    tests_on_path()
    from flatscore.models.embedded import load_model
    from flatscore.models.local import LocalBackend
    from flatscore.run.tau2 import lib
    from flatscore.run.tau2.job import Tau2Endpoint
    from flatscore.run.tau2.runner import simulate
    from flatscore.serve.app import create_app
    from scripted_endpoint import TAU2_SCRIPTS, ScriptedEndpoint

    t2 = lib.load()
    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "2")))
    loaded = load_model("embedded")
    task = t2.get_tasks(task_set_name="retail", task_split_name="base", num_tasks=1)[0]
    title = (
        f"(b) one τ² retail episode (task {task.id}), max_steps {max_steps}, agent max_tokens "
        f"{max_tokens}, τ²'s user scripted; the embedded agent through flatscore serve"
    )
    results = {}
    with ScriptedEndpoint(TAU2_SCRIPTS) as user_server:
        user = Tau2Endpoint.openai(
            user_server.url, "chatty-user", None, max_retries=0, timeout_s=60
        )
        for reuse in (False, True):
            backend = LocalBackend(loaded, reuse_kv=reuse)
            server, url = _serve_in_thread(create_app(backend, "smol"))
            agent = Tau2Endpoint.openai(url, "smol", None, max_retries=0, timeout_s=3600)
            t0 = time.perf_counter()
            sim = simulate(
                t2,
                domain="retail",
                task=task,
                seed=1,
                trial=0,
                agent=agent,
                agent_args=agent.llm_args({"temperature": 0, "max_tokens": max_tokens}),
                user=user,
                user_args=user.llm_args({"temperature": 0}),
                max_steps=max_steps,
                max_errors=10,
            )
            wall = time.perf_counter() - t0
            server.should_exit = True
            turns = sum(1 for m in sim["messages"] if m["role"] == "assistant")
            results[reuse] = (wall, backend.encoded_tokens, turns)
            print(f"KV reuse {reuse}: {wall:.1f} s", flush=True)
    (off, off_tokens, turns), (on, on_tokens, _) = results[False], results[True]
    header = ["agent turns", "KV reuse off s", "KV reuse on s", "speed-up", "prompt tokens encoded"]
    row = [turns, f"{off:.1f}", f"{on:.1f}", f"{off / on:.2f}×", f"{off_tokens:,} / {on_tokens:,}"]
    return Table(header, [row], "r", title=title)


# --- (c) overhead ------------------------------------------------------------------------------


def part_c(episodes: int, delay_s: float) -> Table:
    tests_on_path()
    from flatscore.run.driver import run_study
    from flatscore.run.study import parse_study
    from flatscore.run.tau2 import lib, runner
    from scripted_endpoint import TAU2_SCRIPTS, ScriptedEndpoint

    lib.load()
    inside = {"s": 0.0}
    real = runner.simulate

    def timed(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            inside["s"] += time.perf_counter() - t0

    runner.simulate = timed
    with (
        ScriptedEndpoint(TAU2_SCRIPTS, delay_s=delay_s) as server,
        tempfile.TemporaryDirectory() as tmp,
    ):
        study = parse_study(
            {
                "name": "overhead",
                "output": tmp,
                "models": [
                    {
                        "name": "m",
                        "kind": "openai",
                        "arms": {"a": {"url": server.url, "served_model": "live-agent"}},
                    }
                ],
                "domains": ["tau2:retail"],
                "concurrency": 1,
                "tau2": {
                    "num_tasks": episodes,
                    "max_steps": 30,
                    "user": {"url": server.url, "model": "chatty-user"},
                },
            }
        )
        t0 = time.perf_counter()
        outcome = run_study(study, progress=False, report=False)
        wall = time.perf_counter() - t0
        model = server.model_seconds
    runner.simulate = real
    ours = wall - inside["s"]
    tau2 = inside["s"] - model
    title = (
        f"(c) {outcome.written} τ² retail episodes (max_steps 30, {server.requests} requests, "
        f"{delay_s:.2f} s each at the endpoint), concurrency 1"
    )
    rows: list[list[object]] = [
        ["wall time", f"{wall:.1f}", "100%"],
        ["the endpoint (model time)", f"{model:.1f}", f"{model / wall:.0%}"],
        [
            "τ²'s own code (environment, orchestrator, evaluator, litellm)",
            f"{tau2:.1f}",
            f"{tau2 / wall:.1%}",
        ],
        ["flatscore (set-up, queue, conversion, writes)", f"{ours:.2f}", f"{ours / wall:.1%}"],
    ]
    return Table(["", "seconds", "share of wall time"], rows, "lr", title=title)


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--parts", default="a,b,c")
    ap.add_argument("--sizes", default="100,500,2000")
    ap.add_argument("--full-up-to", type=int, default=100, help="(a) measure τ² in full")
    ap.add_argument("--b-max-steps", type=int, default=16)
    ap.add_argument("--b-max-tokens", type=int, default=32)
    ap.add_argument("--c-episodes", type=int, default=5)
    ap.add_argument("--c-delay", type=float, default=1.0, help="endpoint seconds per request")


def run(args: argparse.Namespace) -> list[Table]:
    parts = args.parts.split(",")
    tables = []
    if "a" in parts:
        tables.append(part_a([int(n) for n in args.sizes.split(",")], args.full_up_to))
    if "c" in parts:
        tables.append(part_c(args.c_episodes, args.c_delay))
    if "b" in parts:
        tables.append(part_b(args.b_max_steps, args.b_max_tokens))
    return tables
