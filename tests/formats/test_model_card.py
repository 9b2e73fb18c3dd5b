"""`flatscore export model-card` on study v2's committed archive: one card per arm whose
`model-index` huggingface_hub parses back (offline), one result per arm and domain, every
number the committed analysis' own."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import pytest

from cli_runner import CliResult
from flatscore.analysis.result import AnalysisResult
from flatscore.store import archive

hub = pytest.importorskip("huggingface_hub", reason="huggingface_hub comes with the local extra")

ROOT = Path(__file__).resolve().parents[2]
V2 = ROOT / "studies" / "embedded-study-v2"
ARMS = ["ref", "ref-control", "ref-planted", "fp8", "int8", "fp8-w8a8", "int4-awq"]


@pytest.fixture(scope="module")
def v2_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The archive's trials 1-2, the 3,192 episodes the committed analysis.json read (later
    chunks add trials 3-4)."""
    base = tmp_path_factory.mktemp("v2")
    archive.unpack(V2 / "runs", base / "all")
    runs = base / "runs"
    runs.mkdir()
    for path in sorted((base / "all").glob("*.jsonl")):
        lines = path.read_text("utf-8").splitlines(keepends=True)
        kept = [line for line in lines if json.loads(line)["trial"] < 2]
        (runs / path.name).write_text("".join(kept), "utf-8")
    return runs


# 3,192 episodes analysed with the study's own settings (5,000 resamples): ~25 s
@pytest.mark.slow  # the fast suite's version reads three arms (below)
def test_study_v2_cards_load_back_with_one_result_per_arm_and_domain(
    v2_runs: Path,
    tmp_path: Path,
    flatscore: Callable[..., CliResult],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = tmp_path / "cards"
    settings = V2 / "analysis.json"
    done = flatscore("export", "model-card", v2_runs, "--out", out, "--settings-from", settings)
    assert done.returncode == 0, done.stderr
    check_cards(out, AnalysisResult.model_validate_json(settings.read_text("utf-8")), ARMS)


def test_three_arms_cards_say_what_analyze_says(
    v2_runs: Path,
    tmp_path: Path,
    flatscore: Callable[..., CliResult],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same checks on three of v2's arms at 200 resamples, against `analyze` on the same
    files with the same options."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    arms = ["ref", "fp8-w8a8", "int4-awq"]
    runs = tmp_path / "runs"
    runs.mkdir()
    for arm in arms:
        name = f"smollm2-135m__{arm}.jsonl"
        (runs / name).write_bytes((v2_runs / name).read_bytes())
    options = ["--reference", "ref", "--budgets", "0-9", "--tost-margin", "7.5"]
    options += ["--bootstrap", "200", "--seed", "0", "--correction", "holm"]
    analysis = tmp_path / "analysis.json"
    done = flatscore("analyze", runs, *options, "--json", analysis)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "cards"
    done = flatscore("export", "model-card", runs, "--out", out, *options)
    assert done.returncode == 0, done.stderr
    check_cards(out, AnalysisResult.model_validate_json(analysis.read_text("utf-8")), arms)


def check_cards(out: Path, want: AnalysisResult, arms: list[str]) -> None:
    """One card per arm that huggingface_hub parses back, every number `want`'s."""
    cells = {c.domain: c for c in want.cells}
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [f"smollm2-135m__{a}" for a in arms] + ["results.md"]
    )
    for arm in arms:
        path = out / f"smollm2-135m__{arm}" / "README.md"
        card = hub.ModelCard.load(path)
        assert card.data.model_name == f"smollm2-135m-{arm}"
        results = card.data.eval_results
        by_domain: dict[str, list[object]] = defaultdict(list)
        for r in results:
            by_domain[r.dataset_type].append(r)
        assert set(by_domain) == {"flatscore/retail", "flatscore/telecom"}
        meta = hub.metadata_load(path)
        assert meta is not None
        (entry,) = meta["model-index"]
        assert len(entry["results"]) == 2  # one per domain
        for result in entry["results"]:
            domain = result["dataset"]["type"].removeprefix("flatscore/")
            cell = cells[domain]
            stats = next(a for a in cell.arms if a.arm == arm)
            metrics = {(m["type"], m.get("args", {}).get("K")): m for m in result["metrics"]}
            s9, s2 = metrics[("success_rate", 9)], metrics[("success_rate", 2)]
            curve = {p.K: p for p in stats.budget_curve}
            assert s9["value"] == pytest.approx(100 * curve[9].success_rate, abs=0.005)
            assert s9["args"]["ci_low"] == pytest.approx(100 * curve[9].ci_low, abs=0.005)
            assert s2["value"] == pytest.approx(100 * curve[2].success_rate, abs=0.005)
            verdict = metrics[("flatscore_verdict", None)]["value"]
            if arm == "ref":
                assert verdict == "reference"
                assert ("failed_call_ratio", None) not in metrics
                continue
            comp = next(c for c in cell.comparisons if c.arm == arm)
            assert verdict == comp.verdict
            ratio = metrics[("failed_call_ratio", None)]
            assert comp.failed_calls is not None
            assert ratio["value"] == pytest.approx(comp.failed_calls.ratio, abs=1e-4)
            assert ratio["args"]["amplified"] == comp.failed_calls.amplified
            adjusted = comp.failed_calls.p_adjusted
            assert adjusted is not None and comp.failed_calls.p_value is not None
            assert ratio["args"]["p_adjusted"] == pytest.approx(adjusted, rel=5e-3, abs=0)
            if comp.failed_calls.p_value < 0.9 * adjusted:  # Holm moved it: not the raw p
                assert ratio["args"]["p_adjusted"] != pytest.approx(
                    comp.failed_calls.p_value, rel=5e-3, abs=0
                )
    # the study's findings, as the cards say them: int4-awq and fp8-w8a8 retail damaged
    int4 = (out / "smollm2-135m__int4-awq" / "README.md").read_text("utf-8")
    assert int4.count("**visible damage**") == 2
    assert "| retail | ref | 114 × 2 |" in int4  # the reference's row beside it
    table = (out / "results.md").read_text("utf-8")
    assert table.count("\n") == 2 + 2 * len(arms)


def test_a_tight_budget_not_analysed_is_one_line(
    v2_runs: Path, tmp_path: Path, flatscore: Callable[..., CliResult]
) -> None:
    one = tmp_path / "one.jsonl"
    one.write_bytes((v2_runs / "smollm2-135m__ref.jsonl").read_bytes())
    done = flatscore(
        "export", "model-card", one, "--out", tmp_path / "c", "--budgets", "9", "--bootstrap", "200"
    )
    assert done.returncode == 2
    assert "K = 2 was not computed" in done.stderr and "Traceback" not in done.stderr
