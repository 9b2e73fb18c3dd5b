"""A study of `kind: openai` arms against a server flatscore did not write: llama.cpp's own
OpenAI-compatible server (`python -m llama_cpp.server`, llama-cpp-python's `[server]`
packages, in the `gguf` extra) serving the shipped SmolLM2 GGUF with its tool-calling chat
format (`chatml-function-calling`), on both built-in domains. Every episode must finish
without an infrastructure error (the server refused `content: null` on the assistant's
tool-call turn: every one did), and tool calls, failures and usage must be recorded as they
are against `flatscore serve` on the same file (run beside it, the same study).

In the fast suite on purpose (CI builds the extra and runs it): one task per domain, two
agent turns each, short replies (~2.7 min at load 5 on 2 cores, most of it llama.cpp's
first, grammar-constrained turns). Skipped, with the reason shown, where llama-cpp-python
or its server packages are not installed. Differences between the two servers: docs/backends.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from flatscore.analysis.analyze import analyze
from flatscore.analysis.settings import AnalysisSettings
from flatscore.episode import Episode
from flatscore.models.servers import ServerPool
from flatscore.run.driver import run_study
from flatscore.run.study import parse_study
from flatscore.store.jsonl import read_episodes
from flatscore.study.server import ServerSpec
from server_processes import NEEDS_LLAMA_CPP_SERVER

pytestmark = [
    # ~1 min of llama.cpp on 2 cores: out of `make test`'s budget; CI runs it on its own
    # (`make test-servers`, called by .ci/run after `make test`)
    pytest.mark.slow,
    *NEEDS_LLAMA_CPP_SERVER,
]

DOMAINS = ["retail", "telecom"]
ARMS = ["llama-cpp", "serve"]  # one arm per server, the same GGUF file behind both
SERVED = "smollm2"


def run(urls: dict[str, str], out: Path) -> list[Episode]:
    """The study: both built-in domains, one task each, an openai arm per server."""
    study = parse_study(
        {
            "name": "third-party",
            "output": str(out),
            "models": [
                {
                    "name": "smollm2-135m",
                    "kind": "openai",
                    "arms": {arm: {"url": urls[arm], "served_model": SERVED} for arm in ARMS},
                    "max_retries": 0,
                    "timeout_s": 300,
                    "cache": False,
                    "sampling": {"temperature": 0, "max_tokens": 48},
                }
            ],
            "domains": DOMAINS,
            "tasks_per_domain": 1,
            "trials": 1,
            "max_steps": 4,  # two agent turns: the second sends the first's calls back
            "concurrency": 1,
        }
    )
    outcome = run_study(study, progress=False, report=False)
    assert outcome.written == len(DOMAINS) * len(ARMS)
    return [ep for path in sorted((out / "runs").glob("*.jsonl")) for ep in read_episodes(path)]


def check_recorded(episodes: list[Episode], arm: str) -> tuple[int, int]:
    """What both servers must give: no infrastructure error, every model turn with its token
    usage, every agent call answered once (paired by id), every failure classified, and the
    analysis counting exactly those calls and failures. Returns (agent calls, failed)."""
    assert sorted(ep.domain for ep in episodes) == DOMAINS and {ep.arm for ep in episodes} == {arm}
    calls = failed = 0
    for ep in episodes:
        assert not ep.is_infrastructure_error, ep.metadata.get("error")
        turns = [m for m in ep.messages[1:] if m.role == "assistant"]  # [0]: the greeting
        assert len(turns) >= 2, ep.domain  # the second request carried the first's calls
        for m in turns:
            assert m.usage is not None and m.usage.prompt_tokens > 0, m
            assert m.usage.completion_tokens > 0 and m.latency_s is not None
        assert ep.usage.prompt_tokens == sum(m.usage.prompt_tokens for m in turns if m.usage)
        results = ep.tool_results()
        agent_calls = [c for m in turns for c in m.tool_calls]
        for call in agent_calls:
            assert call.requestor == "agent" and call.id in results, call
            result = results[call.id]
            assert result.error == (result.error_kind is not None), result
        calls += len(agent_calls)
        failed += sum(results[c.id].error for c in agent_calls)
    analysis = analyze(episodes, AnalysisSettings(bootstrap=200))
    assert analysis.infrastructure_errors == 0
    stats = [a for cell in analysis.cells for a in cell.arms]
    assert sum(a.agent_tool_calls for a in stats) == calls
    assert sum(a.failed_agent_calls for a in stats) == failed
    return calls, failed


def test_a_study_against_llama_cpps_own_server_records_as_against_serve(
    tmp_path: Path,
) -> None:
    from flatscore.models.gguf_files import reference_file

    gguf = str(reference_file("embedded-base"))  # the shipped Q4_1 file, as it is
    # both started by flatscore's own launcher (`server:` arms use it too)
    llama = ServerSpec(kind="llama-cpp", model=gguf, start_timeout_s=180)
    ours = ServerSpec(kind="flatscore", model=gguf, engine="gguf", start_timeout_s=180)
    with ServerPool(tmp_path / "logs") as pool:
        urls = {
            "llama-cpp": pool.start("llama-cpp", llama, SERVED).url,
            "serve": pool.start("serve", ours, SERVED).url,
        }
        episodes = run(urls, tmp_path / "study")
    third_party = [ep for ep in episodes if ep.arm == "llama-cpp"]
    served = [ep for ep in episodes if ep.arm == "serve"]
    calls, failed = check_recorded(third_party, "llama-cpp")
    assert calls > 0  # its grammar-constrained format calls a tool on every turn here
    check_recorded(served, "serve")

    # Recorded alike: the same fields in every episode, whichever server answered.
    def fields(episodes: list[Episode]) -> set[str]:
        return {k for ep in episodes for k, v in ep.model_dump().items() if v not in (None, {})}

    assert fields(third_party) == fields(served)
    # the study pairs the two servers like two arms: one cell per domain, both arms in it
    result = analyze(episodes, AnalysisSettings(reference="serve", bootstrap=200))
    assert [len(cell.arms) for cell in result.cells] == [2, 2]
    # llama.cpp's tool names are constrained by its grammar: never a name outside the list
    names = {name for ep in third_party for name in ep.tools.agent}
    assert {c.name for ep in third_party for m in ep.messages for c in m.tool_calls} <= names
    print(f"llama_cpp.server: {calls} agent calls, {failed} failed")
