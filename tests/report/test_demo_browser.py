"""The demo's report in headless Chromium: the whole study v2 from its committed archive, with
a slice of live episodes run on this machine (tests/fixtures/v2_slice: run files `flatscore
demo` wrote) compared with it. The first screen says how many episodes reproduced and each
arm's verdict — visible damage, no damage detected, and the planted control's flat score
over amplified failures, whose S(K) is closer at K = 9 than at K = 0. No model runs."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from chromium import chromium, require_chromium
from flatscore.run.reproduce import DemoResult, report_study, slice_study

pytestmark = pytest.mark.browser

require_chromium()

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
ARCHIVE = ROOT / "studies" / "embedded-study-v2" / "runs"
LIVE = ROOT / "tests" / "fixtures" / "v2_slice"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> DemoResult:
    out = tmp_path_factory.mktemp("demo")
    study = slice_study(out, ROOT)
    return report_study(
        ARCHIVE, out, study, live_runs=LIVE, console=Console(file=io.StringIO(), width=200)
    )


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    with chromium(tmp_path_factory.mktemp("chromium-profile")) as browser:
        yield browser


@pytest.mark.slow  # fast: study v3's first screen, tests/report/test_first_screen_browser.py
def test_the_first_screen_says_what_reproduced_and_every_verdict(
    demo: DemoResult, driver: WebDriver
) -> None:
    rep = demo.reproduction
    live = len(list(LIVE.glob("*.jsonl")))
    assert rep is not None and rep.checked >= live and rep.exact  # this machine made them
    count = f"{rep.checked} of {rep.checked} episodes reproduced exactly on this machine"
    driver.get(demo.report.html.resolve().as_uri())
    WebDriverWait(driver, 60).until(lambda d: d.find_elements(By.ID, "reproduced"))
    headline = driver.find_element(By.CSS_SELECTOR, "#reproduced h2")
    assert headline.text == count and headline.is_displayed()
    top = driver.execute_script("return arguments[0].getBoundingClientRect().top", headline)
    assert 0 <= top < 400  # on the first screen, under the sticky header
    banner = driver.find_element(By.ID, "first-screen").text
    # the count tops the first screen, each comparison's line under it once
    assert driver.find_elements(By.CSS_SELECTOR, "#first-screen h2") == [headline]
    arms = driver.find_elements(By.CSS_SELECTOR, "#first-screen li[data-arm]")
    assert len(arms) == sum(len(cell.comparisons) for cell in demo.analysis.cells) == 12
    for verdict in ("visible damage", "no damage detected", "flat score, amplified failures"):
        assert verdict in banner, verdict
    lines = {
        el.get_attribute("data-cell"): el.text
        for el in driver.find_elements(By.CSS_SELECTOR, "#first-screen .verdict-lines")
    }
    assert set(lines) == {"smollm2-135m · retail", "smollm2-135m · telecom"}
    retail, telecom = lines["smollm2-135m · retail"], lines["smollm2-135m · telecom"]
    assert "int4-awq vs ref: visible damage" in retail and "int8 vs ref: no damage detected" in (
        telecom
    )
    assert "fp8-w8a8 vs ref: visible damage" in retail
    for text in (retail, telecom):
        assert "ref-planted vs ref: flat score, amplified failures" in text
        assert "114 paired tasks read; sequential replay:" in text
        assert "decided after" in text  # the replay's decision beside the study's verdict
        masked = next(line for line in text.splitlines() if line.startswith("ref-planted: S(K)"))
        # "level" only where the K = 9 interval holds 0 (report.first_screen.interval_words)
        assert "ref's at K = 9" in masked and "further apart at K = 0" in masked
    # the study's own numbers (docs/embedded-study-v2.md): planted retail Gap(0) +16.2
    assert "(gap +16.2 [+11.8, +22.1] points)" in retail


@pytest.mark.slow  # builds the reproduced report (7 s); tests/run/test_reproduce.py is fast
def test_the_banner_is_in_summary_md(demo: DemoResult) -> None:
    summary = demo.report.summary.read_text("utf-8")
    assert summary.startswith("**")
    assert "episodes reproduced exactly on this machine**" in summary.splitlines()[0]
    assert (
        "- int4-awq vs ref: visible damage · 114 paired tasks read; sequential replay: visible "
        "damage, decided after"
    ) in summary
    assert "Read sequentially, this study would have stopped after" in summary  # its saving
