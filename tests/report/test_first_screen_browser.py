"""Study v3's report in headless Chromium: its committed archive unpacked and reported with the
documented command (docs/embedded-study-v3.md; a small bootstrap, the numbers checked here do
not depend on it), opened at 1,400 and 900 px wide in a 900 px tall window. The first screen
holds every comparison's verdict with where it was decided and the sequential saving, above
the fold; the verdicts are the ones the Verdicts section and the statistics table show; and
nothing on the page is wider than its box — a table wider than the column scrolls inside its
`.scroll` wrapper, as designed, and no SVG label runs past its figure's edge.

Skips, with the reason, when Chromium or its driver is missing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chromium import chromium, require_chromium
from cli_runner import flatscore
from flatscore.store import archive

# A sequential study's report in Chromium at three heights (15 s): the slow tier;
# tests/report/test_browser.py is the fast suite's browser test.
pytestmark = [pytest.mark.browser, pytest.mark.slow]

require_chromium()

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
ARCHIVE = ROOT / "studies" / "embedded-study-v3" / "runs"
HEIGHT = 900

SPILLS = r"""
// Every element whose content is wider than its box: [what, scrollWidth, clientWidth,
// overflow-x, in a .scroll wrapper]; and every SVG label outside its figure.
const name = (el) => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '')
  + (typeof el.className === 'string' && el.className
     ? '.' + el.className.split(' ').join('.') : '');
const wide = [], labels = [];
document.querySelectorAll('body *').forEach((el) => {
  if (el.closest('svg') || el.getClientRects().length === 0) return;
  if (el.clientWidth > 0 && el.scrollWidth > el.clientWidth + 1) {
    wide.push([name(el), el.scrollWidth, el.clientWidth, getComputedStyle(el).overflowX,
      el.classList.contains('scroll')]);
  }
});
document.querySelectorAll('svg text').forEach((t) => {
  const r = t.getBoundingClientRect(), s = t.ownerSVGElement.getBoundingClientRect();
  if (!t.textContent.trim() || r.width === 0) return;
  if (r.left < s.left - 1 || r.right > s.right + 1 || r.top < s.top - 1 || r.bottom > s.bottom + 1)
    labels.push([t.ownerSVGElement.id, t.textContent.trim()]);
});
return [wide, labels, document.documentElement.scrollWidth, window.innerWidth];
"""


@pytest.fixture(scope="module")
def v3(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report folder (report.html, analysis.json) of study v3's committed runs."""
    tmp = tmp_path_factory.mktemp("study-v3")
    archive.unpack(ARCHIVE, tmp / "runs")
    done = flatscore(
        *("report", tmp / "runs", "--out", tmp / "report", "--trial-range", "1-2"),
        *("--reference", "ref", "--budgets", "0-9", "--tost-margin", "7.5"),
        *("--bootstrap", "200", "--seed", "0", "--correction", "holm", "--sequential"),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return tmp / "report"


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    with chromium(tmp_path_factory.mktemp("chromium-profile")) as browser:
        yield browser


def _open(driver: WebDriver, report: Path, width: int) -> None:
    driver.set_window_size(width, HEIGHT)
    driver.get((report / "report.html").resolve().as_uri())
    WebDriverWait(driver, 60).until(  # the transcript list, unpacked asynchronously
        lambda d: d.find_element(By.ID, "transcripts").get_attribute("data-state")
    )


def _comparisons(report: Path) -> list[tuple[str, dict[str, Any]]]:
    result = json.loads((report / "analysis.json").read_text("utf-8"))
    return [(cell["domain"], c) for cell in result["cells"] for c in cell["comparisons"]]


@pytest.mark.parametrize("width", [1400, 900])
def test_every_verdict_and_its_decision_is_on_the_first_screen(
    driver: WebDriver, v3: Path, width: int
) -> None:
    _open(driver, v3, width)
    fold = driver.execute_script("return window.innerHeight")
    screen = driver.find_element(By.ID, "first-screen")
    assert screen.find_element(By.TAG_NAME, "h2").text == "Verdicts at a glance"
    bottom = driver.execute_script("return arguments[0].getBoundingClientRect().bottom", screen)
    assert bottom <= fold, (bottom, fold)  # the whole first screen, without scrolling
    saving = screen.find_element(By.CLASS_NAME, "saving").text
    assert saving.startswith("Run sequentially: 2,400 episodes against the fixed design's 3,192")
    comparisons = _comparisons(v3)
    assert len(comparisons) == 12
    for domain, c in comparisons:
        line = screen.find_element(
            By.CSS_SELECTOR,
            f".verdict-lines[data-cell='gemma3-270m · {domain}'] li[data-arm='{c['arm']}']",
        )
        assert line.is_displayed()
        seq = c["sequential"]
        badge = line.find_element(By.CLASS_NAME, "badge").text
        # the run's sequential verdict leads: decided, at the maximum, or "inconclusive"
        # while open (planned looks left), the fixed design's named beside it
        assert badge == seq["verdict"], (domain, c["arm"])
        decision = line.find_element(By.CLASS_NAME, "decision").text
        if seq.get("more_tasks"):
            assert f"open after {seq['tasks']} tasks" in decision
        elif seq["tasks"] < seq["tasks_available"]:
            assert f"decided after {seq['tasks']} of {seq['tasks_available']} paired" in decision
        else:
            assert f"at the design's maximum, {seq['tasks']} paired tasks" in decision
        # the same verdict as the Verdicts section's headline the line links to
        target = line.find_element(By.TAG_NAME, "a").get_attribute("href").split("#")[1]
        headline = driver.find_element(By.ID, target)
        assert headline.find_element(By.CSS_SELECTOR, "h4 .badge").get_attribute(
            "textContent"
        ) == badge and headline.find_element(By.TAG_NAME, "h4").get_attribute(
            "textContent"
        ).startswith(f"{c['arm']} vs ref")


@pytest.mark.parametrize("width", [1400, 900])
def test_nothing_is_wider_than_its_box(driver: WebDriver, v3: Path, width: int) -> None:
    _open(driver, v3, width)
    wide, labels, page, window = driver.execute_script(SPILLS)
    assert page <= window, (page, window)  # no sideways scrolling of the page itself
    assert labels == []
    # only the tables' .scroll wrappers (the transcript list among them) are wider inside
    # than their box, and they scroll: nothing spills out or is cut off
    assert [w for w in wide if not (w[4] and w[3] == "auto")] == []
    assert any(w[0] == "div.scroll" for w in wide)  # seven arms' channel table, at least
