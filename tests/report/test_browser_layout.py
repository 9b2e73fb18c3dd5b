"""The committed seven-arm report (studies/embedded-study-v2/report.html) at 1,400 px in headless
Chromium: the page is no wider than the window, no two text labels of a plot overlap (their
SVG bounding boxes, as the browser lays them out), and no Markdown pipe or backtick shows as
text. Skips, with the reason, when Chromium or its driver is missing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from chromium import chromium, require_chromium

pytestmark = pytest.mark.browser

require_chromium()

from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402

REPORT = Path(__file__).parents[2] / "studies" / "embedded-study-v2" / "report.html"

OVERLAPS = r"""
const out = [];
document.querySelectorAll('svg').forEach((svg) => {
  const boxes = [...svg.querySelectorAll('text')]
    .filter((t) => t.textContent.trim() && t.getBBox().width > 0)
    .map((t) => [t.getBoundingClientRect(), t.textContent.trim()]);
  for (let i = 0; i < boxes.length; i++) {
    for (let j = i + 1; j < boxes.length; j++) {
      const [a, ta] = boxes[i], [b, tb] = boxes[j];
      const x = Math.min(a.right, b.right) - Math.max(a.left, b.left);
      const y = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
      if (x > 0.5 && y > 0.5) out.push([svg.id, ta, tb]);
    }
  }
});
return out;
"""


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    with chromium(tmp_path_factory.mktemp("chromium-profile")) as browser:
        browser.set_window_size(1400, 1000)
        browser.get(REPORT.as_uri())
        yield browser


def test_the_page_is_no_wider_than_the_window(page: WebDriver) -> None:
    width, inner = page.execute_script(
        "return [document.documentElement.scrollWidth, window.innerWidth]"
    )
    assert inner <= 1400 and width <= inner, (width, inner)


def test_no_two_labels_of_a_plot_overlap(page: WebDriver) -> None:
    assert page.execute_script("return document.querySelectorAll('svg text').length") > 500
    assert page.execute_script(OVERLAPS) == []


def test_no_markdown_shows_as_text(page: WebDriver) -> None:
    text = page.execute_script("return document.body.innerText")
    assert "`" not in text
    assert not [line for line in text.splitlines() if line.lstrip().startswith("|")]
    assert "paired paired" not in text and "see gap_growth" not in text
    assert page.execute_script("return document.querySelectorAll('pre.table').length") == 0
    assert page.title.startswith("flatscore · ")
