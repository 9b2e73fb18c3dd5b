"""report.html without a browser: safe JSON embedding, escaping, CSP, determinism, and
agreement between the transcript browser's channel labels and the analysis numbers."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import math
import random
import re
import warnings
from collections import Counter
from html import unescape as html_unescape
from html.parser import HTMLParser
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from report_episodes import PAYLOADS, Step, analyzed, episode, study

from flatscore.analysis.analyze import AnalysisOptions, analyze
from flatscore.analysis.channels import load_rules
from flatscore.analysis.result import AnalysisResult
from flatscore.episode import Episode, TerminationReason
from flatscore.report import ReportPaths, write_report
from flatscore.report.html import SECTIONS, json_for_script, transcript_data
from flatscore.report.transcripts import MAX_TEXT, browser_payload

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(JSON)
@settings(max_examples=300, deadline=None)
def test_embedded_json_round_trips_and_cannot_break_out(data: object) -> None:
    text = str(json_for_script(data))
    assert json.loads(text) == data
    assert not set(text) & {"<", ">", "&"}
    assert text.isascii()


def test_embedded_json_known_answer() -> None:
    assert str(json_for_script({"a": "</script><b>&"})) == (
        '{"a":"\\u003c/script\\u003e\\u003cb\\u003e\\u0026"}'
    )


def test_small_payloads_stay_json_and_large_ones_are_packed() -> None:
    payload = {"episodes": [{"text": f"</script> {i} & é"} for i in range(50)]}
    plain = str(json_for_script(payload))
    assert transcript_data(payload, compress_above=len(plain)) == ("json", plain)
    encoding, text = transcript_data(payload, compress_above=len(plain) - 1)
    assert encoding == "gzip+base64"
    assert re.fullmatch(r"[A-Za-z0-9+/]+=*", str(text))  # nothing that could end a script
    assert gzip.decompress(base64.b64decode(str(text))).decode("ascii") == plain
    assert json.loads(gzip.decompress(base64.b64decode(str(text)))) == payload
    # deterministic: no time or file name in the gzip header
    assert transcript_data(payload, compress_above=0) == (encoding, text)
    assert base64.b64decode(str(text))[4:8] == b"\0\0\0\0"  # gzip MTIME


def test_a_packed_report_carries_the_same_data(
    hostile_report: ReportPaths, packed_hostile_report: ReportPaths
) -> None:
    html = packed_hostile_report.html.read_text("utf-8")
    packed = re.search(
        r'<script type="application/octet-stream" id="fs-data" data-encoding="gzip\+base64">'
        r"(.*?)</script>",
        html,
        re.S,
    )
    assert packed is not None
    plain = re.search(
        r'<script type="application/json" id="fs-data">(.*?)</script>',
        hostile_report.html.read_text("utf-8"),
        re.S,
    )
    assert plain is not None
    assert gzip.decompress(base64.b64decode(packed.group(1))).decode("ascii") == plain.group(1)
    # the page's script is the same, so the CSP hash is too
    assert _page_script(html) == _page_script(hostile_report.html.read_text("utf-8"))


def _page_script(html: str) -> str:
    scripts = re.findall(r"<script>(.*?)</script>", html, flags=re.S)
    assert len(scripts) == 1
    return scripts[0]


def test_page_is_self_contained_and_its_csp_allows_only_its_own_script(
    study_report: ReportPaths,
) -> None:
    html = study_report.html.read_text("utf-8")
    for section_id, _ in SECTIONS:
        assert f'<section id="{section_id}">' in html
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:|//|javascript:)""", html, re.I)
    assert '<link rel="stylesheet"' not in html and "@import" not in html
    digest = base64.b64encode(hashlib.sha256(_page_script(html).encode()).digest()).decode()
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html)
    assert csp is not None
    policy = html_unescape(csp.group(1))
    assert f"script-src 'sha256-{digest}';" in policy
    assert "default-src 'none';" in policy
    ids = re.findall(r'\sid="([^"]+)"', html)
    assert len(ids) == len(set(ids)), "every element id is unique (several SVGs share a page)"


def test_same_inputs_give_the_same_bytes_in_any_episode_order(
    tmp_path: Path, study_episodes: list[Episode], study_report: ReportPaths
) -> None:
    shuffled = list(study_episodes)
    random.Random(7).shuffle(shuffled)
    again = write_report(analyzed(shuffled), shuffled, tmp_path)
    for a, b in (
        (study_report.html, again.html),
        (study_report.summary, again.summary),
        (study_report.analysis, again.analysis),
    ):
        assert a.read_bytes() == b.read_bytes(), a.name


def test_timestamp_only_when_passed(tmp_path: Path, study_episodes: list[Episode]) -> None:
    analysis = analyzed(study_episodes)
    stamped = write_report(analysis, study_episodes, tmp_path, generated_at="2026-11-30T03:00Z")
    html = stamped.html.read_text("utf-8")
    assert "generated 2026-11-30T03:00Z" in html
    assert "2026-11-30T03:00Z" in stamped.summary.read_text("utf-8")


class _Tags(HTMLParser):
    """Every start tag with its attributes, as an HTML parser (and a browser) reads them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def test_hostile_text_appears_only_escaped(hostile_report: ReportPaths) -> None:
    html = hostile_report.html.read_text("utf-8")
    assert "__pwned" in html  # the payloads are there, as data and as escaped text
    parser = _Tags()
    parser.feed(html)
    names = [tag for tag, _ in parser.tags]
    assert names.count("script") == 2  # the data block and the page's own script
    assert not {"img", "iframe", "object", "embed", "b", "textarea"} & set(names)
    assert names.count("svg") == 5  # the one cell's plots and the cost figure, nothing else
    for tag, attrs in parser.tags:
        assert not [a for a in attrs if a.startswith("on")], (tag, attrs)
        if tag == "a":
            assert (attrs.get("href") or "").startswith("#"), attrs
    assert "&lt;script&gt;window.__pwned=1" in html  # a rank-plot label (SVG text)


def test_browser_labels_agree_with_the_analysis_counts(study_episodes: list[Episode]) -> None:
    """The transcript browser uses the analysis's own classifier: its per-call labels sum to
    the channel counts in analysis.json, arm by arm."""
    analysis = analyzed(study_episodes)
    payload = browser_payload(analysis, study_episodes, load_rules())
    counted: Counter[tuple[str, str, str]] = Counter()
    for ep in payload["episodes"]:
        for m in ep["messages"]:
            for call in m.get("calls", []):
                if call["channel"]:
                    counted[(ep["cell"], ep["arm"], call["channel"])] += 1
            if m.get("malformed"):
                counted[(ep["cell"], ep["arm"], "malformed_output")] += 1
    assert counted, "the fixture has failed calls"
    for cell in analysis.cells:
        key = f"{cell.model} · {cell.domain}"
        for arm in cell.arms:
            for channel, stat in arm.channels.items():
                if channel == "unknown_tool":
                    expected = (
                        counted[(key, arm.arm, "role_confusion")]
                        + counted[(key, arm.arm, "invented")]
                    )
                else:
                    expected = counted[(key, arm.arm, channel)]
                assert stat.count == expected, (key, arm.arm, channel)


def test_browser_payload_order_interning_and_truncation(study_episodes: list[Episode]) -> None:
    long = study_episodes[0].model_copy(deep=True)
    assert long.messages[1].role == "user"
    long.messages[1].content = "x" * (MAX_TEXT + 50)
    episodes = [long, *study_episodes[1:]]
    payload = browser_payload(analyzed(episodes), episodes, load_rules())
    records = payload["episodes"]
    assert len(records) == len(episodes)
    keys = [(r["cell"], r["task"], r["trial"]) for r in records]
    assert keys == sorted(keys)
    # Within a (cell, task, trial), the reference arm comes first.
    assert records[0]["arm"] == "bf16" and records[1]["arm"] == "int4"
    assert len(payload["shared"]) == 2  # one system prompt per domain, stored once
    assert all("shared" in r["messages"][0] for r in records)
    cut = next(r for r in records if r["id"] == long.episode_id)["messages"][1]["text"]
    assert cut.startswith("x" * MAX_TEXT) and cut.endswith("[50 more characters not shown]")
    assert payload["arms"] == ["bf16", "int4"]
    assert payload["channels"][0] == "role_confusion"


def test_every_payload_string_survives_as_data(hostile_report: ReportPaths) -> None:
    html = hostile_report.html.read_text("utf-8")
    data = re.search(r'<script type="application/json" id="fs-data">(.*?)</script>', html, re.S)
    assert data is not None
    texts = json.dumps(json.loads(data.group(1)), ensure_ascii=False)
    for payload in PAYLOADS:
        assert json.dumps(payload, ensure_ascii=False)[1:-1] in texts


def test_degenerate_studies_render_without_warnings(tmp_path: Path) -> None:
    """One arm (nothing to compare); no failure at all plus an infrastructure error."""
    single = study(tasks=3, arms=("bf16",))
    clean = [
        episode(arm, f"t{t}", 0, [Step("get_user_details")], success=True)
        for arm in ("bf16", "int4")
        for t in range(4)
    ]
    clean.append(
        episode(
            "int4", "t9", 0, [], success=False, termination=TerminationReason.INFRASTRUCTURE_ERROR
        )
    )
    for i, episodes in enumerate((single, clean)):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            paths = write_report(analyzed(episodes), episodes, tmp_path / str(i))
        html = paths.html.read_text("utf-8")
        cells = analyzed(episodes).cells
        # no hallucinated name in any arm: one line instead of an empty rank plot per arm
        assert html.count('<figure class="plot"') == 3 * len(cells)
        assert ("No hallucinated tool names" in html) == any(c.comparisons for c in cells)


def test_lower_bound_budgets_are_marked(tmp_path: Path) -> None:
    """S(K) at K ≥ the recorded max_errors is only a lower bound: the table says so."""
    episodes = study(tasks=3)
    for e in episodes:
        e.error_budget.max_errors = 3
    analysis = analyze(episodes, AnalysisOptions(budgets=list(range(6)), bootstrap=200))
    html = write_report(analysis, episodes, tmp_path).html.read_text("utf-8")
    assert "<td>≥ " in html and "is a lower bound" in html


def test_imported_tau2_logs_get_their_channels_in_the_browser() -> None:
    """τ²'s own file (tests/fixtures/tau2/v1.0/ok.json): the unknown tool and the call with a
    missing argument are labelled by the analysis's rules from the error text alone."""
    from flatscore.formats import load_runs

    sample = Path(__file__).resolve().parents[1] / "fixtures" / "tau2" / "v1.0" / "ok.json"
    episodes = list(load_runs([sample]))
    payload = browser_payload(analyzed(episodes), episodes, load_rules())
    calls = [c for m in payload["episodes"][0]["messages"] for c in m.get("calls", [])]
    by_name = {c["name"]: c for c in calls}
    assert by_name["get_user"]["status"] == "error"
    assert by_name["get_user"]["channel"] == "near_miss"  # mock has get_users
    assert [c["channel"] for c in calls if c["status"] == "error"][1] == "bad_arguments"
    assert all(c["channel"] is None for c in calls if c["status"] == "ok")


def test_budget_curves_carry_their_bootstrap_bands(study_episodes: list[Episode]) -> None:
    from flatscore.report.html import _arm_band

    cell = analyze(study_episodes, AnalysisOptions(bootstrap=200)).cells[0]
    band = _arm_band(cell, 0)
    assert band.low is not None and band.high is not None
    for lo, y, hi in zip(band.low, band.y, band.high, strict=True):
        assert lo is not None and y is not None and hi is not None
        assert lo <= y <= hi


def test_report_states_where_the_weights_came_from(
    tmp_path: Path, study_episodes: list[Episode]
) -> None:
    from flatscore.report.html import model_weights

    episodes = [
        e.model_copy(update={"metadata": {**e.metadata, "weights": "a Q4_1 GGUF <b>x</b>"}})
        if e.arm == "bf16"
        else e
        for e in study_episodes
    ]
    model = episodes[0].model
    assert model_weights(episodes) == [(model, ["bf16"], "a Q4_1 GGUF <b>x</b>")]
    html = write_report(analyzed(episodes), episodes, tmp_path).html.read_text("utf-8")
    assert "a Q4_1 GGUF &lt;b&gt;x&lt;/b&gt;. Precision arms quantize" in html
    plain = write_report(analyzed(study_episodes), study_episodes, tmp_path / "p")
    assert 'class="weights"' not in plain.html.read_text("utf-8")


def test_each_cell_shows_its_diagnostics_against_the_noise_floor(
    study_report: ReportPaths,
) -> None:
    """One floor figure per cell (the fixture has 2 trials: one split), with the verdict; its
    6 tasks are too few for a bootstrap, so the floors have no standard error and no band
    past them."""
    html = study_report.html.read_text("utf-8")
    analysis = AnalysisResult.model_validate_json(study_report.analysis.read_text("utf-8"))
    assert html.count('data-plot="floor"') == len(analysis.cells)
    for cell in analysis.cells:
        for c in cell.comparisons:
            assert c.noise_floor is not None and c.noise_floor.splits == 1
            assert f"{c.arm}: {c.noise_floor.invariance}." in html
            assert all(s.floor_se is None for s in c.noise_floor.diagnostics.values())
    assert "lighter band" not in html


def test_the_floor_figure_states_each_floor_with_its_standard_error(tmp_path: Path) -> None:
    """With enough tasks for the bootstrap, the caption gives the failed-call and Gap(K)
    floors the grey bands show with their standard errors (the ratio's as a factor), and
    the lighter band out to 2 of them."""
    episodes = study(tasks=30)
    analysis = analyzed(episodes)
    html = write_report(analysis, episodes, tmp_path).html.read_text("utf-8")
    for cell in analysis.cells:
        nf = cell.comparisons[0].noise_floor
        assert nf is not None
        d, k = nf.diagnostics, cell.comparisons[0].gap_amplification.k_small
        fc, gap = d["failed_calls"], d[f"gap.K{k}"]
        assert fc.floor_full_trials is not None and fc.floor_full_trials_se is not None
        assert gap.floor_full_trials is not None and gap.floor_full_trials_se is not None
        factor = math.exp(fc.floor_full_trials_se)
        assert f"failed calls ×{fc.floor_full_trials:.2f} (SE ×{factor:.2f})" in html
        assert (
            f"Gap(K={k}) ±{100 * gap.floor_full_trials:.1f} points "
            f"(SE {100 * gap.floor_full_trials_se:.1f})"
        ) in html
    assert html.count("The lighter band widens the floor by 2 standard errors") == len(
        analysis.cells
    )
