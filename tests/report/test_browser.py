"""The report in a real browser: headless Chromium (Debian `chromium` + `chromium-driver`)
driven by selenium opens report.html from a file:// URL, finds every section and plot, uses
the transcript browser, and checks that hostile transcripts execute nothing.

Skips, with the reason, when Chromium or its driver is missing. Screenshots are written to
a temporary folder and their paths printed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from report_episodes import PAYLOADS

from chromium import chromium, require_chromium
from flatscore.report import ReportPaths
from flatscore.report.html import SECTIONS

pytestmark = pytest.mark.browser

require_chromium()

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    with chromium(tmp_path_factory.mktemp("chromium-profile"), console_log=True) as browser:
        yield browser


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("screenshots")


def _open(driver: WebDriver, path: Path, transcripts: str = "ready") -> None:
    """Load a report and wait until its transcript browser has its data (a packed payload is
    unpacked asynchronously) or, `transcripts="failed"`, has said why it cannot."""
    driver.get(path.resolve().as_uri())
    driver.get_log("browser")  # start each page with an empty console log
    driver.refresh()
    WebDriverWait(driver, 60).until(
        lambda d: d.find_element(By.ID, "transcripts").get_attribute("data-state")
    )
    assert driver.find_element(By.ID, "transcripts").get_attribute("data-state") == transcripts


def _errors(driver: WebDriver) -> list[dict[str, Any]]:
    """Console messages at error level: script errors, CSP violations, failed loads."""
    return [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]


def _screenshot(driver: WebDriver, path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1400, min(int(height) + 100, 12000))
    driver.save_screenshot(str(path))
    driver.set_window_size(1400, 1000)
    assert path.stat().st_size > 10_000
    with capsys.disabled():
        print(f"\nscreenshot: {path}")


def _rows(driver: WebDriver) -> list[Any]:
    return driver.find_elements(By.CSS_SELECTOR, "#fs-episodes tbody tr")


def _pwned(driver: WebDriver) -> object:
    return driver.execute_script(
        "return typeof window.__pwned === 'undefined' ? null : window.__pwned"
    )


def _assert_cost_figure(driver: WebDriver, cells: int) -> None:
    """The Cost section: its quality-against-cost figure (one panel per cell) is drawn and
    its table has a row per arm of each cell."""
    section = driver.find_element(By.ID, "cost")
    assert section.is_displayed()
    svg = driver.find_element(By.CSS_SELECTOR, "#cost-figure > svg")
    assert svg.size["width"] > 300 and svg.size["height"] > 150
    panels = svg.find_elements(By.CSS_SELECTOR, "g[id*='axes_']")
    assert len(panels) == cells
    assert "cost per successful episode" in svg.text
    table = section.find_element(By.CSS_SELECTOR, "table")  # an HTML table, not Markdown
    head = [th.text for th in table.find_elements(By.CSS_SELECTOR, "thead th")]
    assert head[:2] == ["model · domain", "arm"] and "machine s/success" in head
    assert "|" not in table.text


def test_sections_plots_and_no_console_errors(
    driver: WebDriver, study_report: ReportPaths, shots: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _open(driver, study_report.html)
    for section_id, _ in SECTIONS:
        section = driver.find_element(By.ID, section_id)
        assert section.is_displayed(), section_id
    kinds = {
        fig.get_attribute("data-plot")
        for fig in driver.find_elements(By.CSS_SELECTOR, "figure.plot")
    }
    assert kinds == {"budget", "channels", "rank", "passk", "floor"}
    svgs = driver.find_elements(By.CSS_SELECTOR, "figure.plot > svg")
    assert len(svgs) == 2 * 5  # two cells, five figures each (the noise floor's included)
    for svg in svgs:
        size = svg.size
        assert size["width"] > 200 and size["height"] > 150
    verdicts = driver.find_elements(By.CSS_SELECTOR, "#verdicts article.verdict")
    assert len(verdicts) == 2
    # 6 tasks: too few to show amplification or equivalence, and the verdict says so
    assert "inconclusive" in verdicts[0].text and "too few tasks" in verdicts[0].text
    assert "At the default budget" in verdicts[0].text
    assert len(_rows(driver)) == 48
    _assert_cost_figure(driver, cells=2)
    assert _errors(driver) == []
    _screenshot(driver, shots / "report.png", capsys)


def test_transcript_filters_and_paired_view(
    driver: WebDriver, study_report: ReportPaths, shots: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _open(driver, study_report.html)
    count = driver.find_element(By.ID, "fs-count")
    assert count.text == "48 of 48 episodes"

    Select(driver.find_element(By.ID, "f-arm")).select_by_value("int4")
    rows = _rows(driver)
    assert len(rows) == 24
    assert {r.find_elements(By.TAG_NAME, "td")[1].text for r in rows} == {"int4"}

    Select(driver.find_element(By.ID, "f-channel")).select_by_value("invented")
    rows = _rows(driver)
    assert 0 < len(rows) < 24
    assert all("invented" in r.find_elements(By.TAG_NAME, "td")[6].text for r in rows)

    Select(driver.find_element(By.ID, "f-outcome")).select_by_value("failure")
    failing = _rows(driver)
    assert all(r.find_elements(By.TAG_NAME, "td")[4].text == "failure" for r in failing)

    Select(driver.find_element(By.ID, "f-outcome")).select_by_value("")
    Select(driver.find_element(By.ID, "f-channel")).select_by_value("")
    Select(driver.find_element(By.ID, "f-task")).select_by_value("r3")
    rows = _rows(driver)
    assert {r.find_elements(By.TAG_NAME, "td")[2].text for r in rows} == {"r3"}
    assert len(rows) == 2  # int4 only, two trials

    Select(driver.find_element(By.ID, "f-arm")).select_by_value("")
    rows = _rows(driver)
    assert len(rows) == 4  # both arms, two trials
    rows[1].click()  # int4, trial 0: role confusion + invented names
    failed = driver.find_elements(By.CSS_SELECTOR, "#fs-transcript .msg.failed")
    assert failed, "failed calls are highlighted"
    labels = {
        b.text for b in driver.find_elements(By.CSS_SELECTOR, "#fs-transcript .call.failed .chan")
    }
    assert "role_confusion" in labels

    driver.find_element(By.ID, "fs-paired-toggle").click()
    columns = driver.find_elements(By.CSS_SELECTOR, "#fs-paired > div")
    assert [c.get_attribute("data-arm") for c in columns] == ["bf16", "int4"]
    assert all(c.find_elements(By.CSS_SELECTOR, ".msg") for c in columns)
    assert _errors(driver) == []
    driver.find_element(By.ID, "transcripts").location_once_scrolled_into_view  # noqa: B018
    driver.save_screenshot(str(shots / "paired.png"))
    with capsys.disabled():
        print(f"\nscreenshot: {shots / 'paired.png'}")


@pytest.fixture(params=[pytest.param("plain", marks=pytest.mark.slow), "packed"])
def any_hostile_report(request: pytest.FixtureRequest) -> ReportPaths:
    """The hostile report with its transcripts as plain JSON and gzip-packed."""
    name = "hostile_report" if request.param == "plain" else "packed_hostile_report"
    paths: ReportPaths = request.getfixturevalue(name)
    return paths


def test_hostile_transcripts_execute_nothing(
    driver: WebDriver,
    any_hostile_report: ReportPaths,
    shots: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    hostile_report = any_hostile_report
    _open(driver, hostile_report.html)
    assert _pwned(driver) is None
    rows = _rows(driver)
    assert len(rows) == 16
    seen = []
    for i in range(len(rows)):
        _rows(driver)[i].click()
        assert _pwned(driver) is None
        seen.append(driver.find_element(By.ID, "fs-detail").text)
    driver.find_element(By.ID, "fs-paired-toggle").click()
    for i in range(len(rows)):
        _rows(driver)[i].click()
    assert _pwned(driver) is None
    # Every payload is on the page as text, not as elements (and no template ran on them).
    for payload in PAYLOADS:
        visible = " ".join(payload.split())  # innerText folds the line separators
        assert any(visible in text for text in seen), payload
    page_text = driver.find_element(By.TAG_NAME, "body").text
    assert "<script>window.__pwned=1</script>" in page_text  # e.g. a novel tool name
    counts = driver.execute_script(
        """return {
            scripts: document.scripts.length,
            imgs: document.querySelectorAll('img').length,
            handlers: Array.from(document.querySelectorAll('*')).filter(
                e => Array.from(e.attributes).some(a => a.name.startsWith('on'))).length,
            links: Array.from(document.querySelectorAll('a[href]')).filter(
                a => !a.getAttribute('href').startsWith('#')).length,
            svgs: document.querySelectorAll('svg').length,
        }"""
    )
    assert counts == {"scripts": 2, "imgs": 0, "handlers": 0, "links": 0, "svgs": 5}
    assert _errors(driver) == []
    _screenshot(driver, shots / "hostile.png", capsys)


def test_csp_blocks_markup_that_gets_in_anyway(
    driver: WebDriver, hostile_report: ReportPaths
) -> None:
    """Defence in depth: even markup inserted into the page cannot run a script."""
    _open(driver, hostile_report.html)
    driver.execute_script(
        "document.body.insertAdjacentHTML('beforeend', arguments[0]);",
        '<img src="data:," onerror="window.__pwned=1"><div onclick="window.__pwned=2"></div>',
    )
    driver.execute_script("document.querySelector('div[onclick]').click();")
    assert _pwned(driver) is None
    assert any("Content Security Policy" in e["message"] for e in _errors(driver))


def test_a_browser_that_cannot_unpack_says_so(
    driver: WebDriver, packed_hostile_report: ReportPaths
) -> None:
    """A packed payload in a browser without DecompressionStream: the numbers still show and
    the transcript browser says why it is empty, without a script error."""
    hide = driver.execute_cdp_cmd(
        "Page.addScriptToEvaluateOnNewDocument",
        {"source": "delete window.DecompressionStream;"},
    )
    try:
        _open(driver, packed_hostile_report.html, transcripts="failed")
        count = driver.find_element(By.ID, "fs-count").text
        assert "not shown" in count and "DecompressionStream" in count
        assert _rows(driver) == []
        assert driver.find_element(By.ID, "verdicts").is_displayed()
        assert _errors(driver) == []
    finally:
        driver.execute_cdp_cmd(
            "Page.removeScriptToEvaluateOnNewDocument", {"identifier": hide["identifier"]}
        )


def test_detector_sees_a_script_that_runs(driver: WebDriver, tmp_path: Path) -> None:
    """Control: the same check on a page without the report's defences does see the payload,
    so a `None` above means nothing ran, not that the check is blind."""
    page = tmp_path / "unsafe.html"
    page.write_text('<!DOCTYPE html><img src="data:," onerror="window.__pwned=1">', "utf-8")
    driver.get(page.as_uri())
    assert _pwned(driver) == 1


# --------------------------------------------------------------------------- the embedded study

ROOT = Path(__file__).resolve().parents[2]
STUDY_ARCHIVE = ROOT / "studies" / "embedded-study" / "runs"
STUDY_ARMS = ["ref", "fp8", "int8", "int4-awq", "int4"]


@pytest.fixture(scope="module")
def embedded_study_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[ReportPaths, int]:
    """The embedded study's report, rebuilt from its committed chunks (docs/embedded-study.md)
    as far as it has run, with a small bootstrap (the page, not the numbers, is tested)."""
    from flatscore.analysis.analyze import AnalysisOptions
    from flatscore.report.rebuild import rebuild
    from flatscore.store.archive import unpack

    runs = tmp_path_factory.mktemp("embedded-study-runs")
    added = unpack(STUDY_ARCHIVE, runs)  # `flatscore archive unpack`
    assert sorted(added) == sorted(f"smollm2-135m__{arm}" for arm in STUDY_ARMS)
    episodes = sum(added.values())
    out = tmp_path_factory.mktemp("embedded-study-report")
    _, paths = rebuild(
        [runs], out, AnalysisOptions(reference="ref", bootstrap=200), title="embedded study"
    )
    return paths, episodes


@pytest.mark.slow  # study v1's whole page; fast: v3's, tests/report/test_first_screen_browser.py
def test_the_embedded_study_report_opens(
    driver: WebDriver,
    embedded_study_report: tuple[ReportPaths, int],
    shots: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    paths, episodes = embedded_study_report
    _open(driver, paths.html)
    # thousands of transcripts: packed (docs/reports.md), unpacked by the page
    data = driver.find_element(By.ID, "fs-data")
    assert data.get_attribute("data-encoding") == "gzip+base64"
    for section_id, _ in SECTIONS:
        assert driver.find_element(By.ID, section_id).is_displayed(), section_id
    cells = driver.find_elements(By.CSS_SELECTOR, "#verdicts article.verdict")
    assert 1 <= len(cells) <= 2  # retail, then telecom as the study reaches it
    # per cell: S(K), channels, the noise floor, pass^k, and one rank plot per arm compared
    # with ref (an arm
    # that has not reached a domain yet has no plot there)
    figures = [
        (f.get_attribute("data-cell"), f.get_attribute("data-plot"))
        for f in driver.find_elements(By.CSS_SELECTOR, "figure.plot")
    ]
    keys = {cell for cell, _ in figures}
    assert len(keys) == len(cells)
    for key in keys:
        kinds = [kind for cell, kind in figures if cell == key]
        assert sorted(k for k in kinds if k != "rank") == [
            "budget",
            "channels",
            "floor",
            "passk",
        ], key
        assert 1 <= kinds.count("rank") <= len(STUDY_ARMS) - 1, key
    for svg in driver.find_elements(By.CSS_SELECTOR, "figure.plot > svg"):
        assert svg.size["width"] > 200 and svg.size["height"] > 150
    assert driver.find_element(By.ID, "fs-count").text == f"{episodes} of {episodes} episodes"
    arm_choices = Select(driver.find_element(By.ID, "f-arm")).options
    assert sorted(o.get_attribute("value") for o in arm_choices if o.get_attribute("value")) == (
        sorted(STUDY_ARMS)
    )
    Select(driver.find_element(By.ID, "f-arm")).select_by_value("int4")
    rows = _rows(driver)
    assert rows and {r.find_elements(By.TAG_NAME, "td")[1].text for r in rows} == {"int4"}
    rows[0].click()
    assert driver.find_elements(By.CSS_SELECTOR, "#fs-transcript .msg")
    _assert_cost_figure(driver, cells=len(cells))
    assert _errors(driver) == []
    _screenshot(driver, shots / "embedded-study.png", capsys)
