"""An exported run opened in Inspect's own viewer: `inspect view` (a local web server, offline)
on loopback, driven by headless Chromium (Debian `chromium` + `chromium-driver`) through
selenium. The sample list shows flatscore's scores as columns, a filter on them narrows the
list, and a sample's transcript shows the tool errors.

Skips, with the reason, when Chromium, its driver or the `inspect` extra is missing.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from chromium import chromium, require_chromium

pytestmark = pytest.mark.browser

require_chromium()
pytest.importorskip("inspect_ai", reason="the `inspect` extra is not installed")

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

from flatscore.formats.inspect_export import export_inspect  # noqa: E402
from flatscore.formats.inspect_log import read_inspect  # noqa: E402

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "inspect" / "orders.eval"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def viewer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`inspect view` serving the export of the fixture log; yields its base URL."""
    logs = tmp_path_factory.mktemp("logs")
    export_inspect(read_inspect(FIXTURE, arm="bf16"), logs)
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "inspect_ai", "view", "start", "--log-dir", str(logs),
         "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                urllib.request.urlopen(url, timeout=2).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"inspect view did not start (exit code {server.poll()})")
                time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    with chromium(tmp_path_factory.mktemp("chromium-profile")) as browser:
        yield browser


def _body(driver: WebDriver) -> str:
    return str(driver.find_element(By.TAG_NAME, "body").text)


def _wait_for(driver: WebDriver, text: str) -> str:
    WebDriverWait(driver, 60).until(lambda d: text in _body(d))
    return _body(driver)


def test_sample_list_shows_flatscore_scores_and_filters(viewer: str, driver: WebDriver) -> None:
    driver.get(viewer + "#/tasks/orders__bf16.eval/samples")
    body = _wait_for(driver, "6 Samples")
    for column in ("REWARD", "SUCCESS", "FAILED_CALLS", "ROLE_CONFUSION", "BAD_ARGUMENTS"):
        assert column in body
    assert "0.333" in body  # success accuracy: 2 of 6
    editor = driver.find_element(By.CSS_SELECTOR, ".cm-content")
    editor.click()
    editor.send_keys("failed_calls > 3")  # the two cancel-A3 epochs failed 5 calls each
    body = _wait_for(driver, "2 / 6 Samples")
    assert "cancel-A3" in body and "cancel-A1" not in body


def test_sample_transcript_shows_tool_errors(viewer: str, driver: WebDriver) -> None:
    driver.get(viewer + "#/tasks/orders__bf16.eval/samples/sample/cancel-A3/1/")
    body = _wait_for(driver, "Tool refund_everything not found")
    assert "Order A3 not found" in body
    assert "'order_id' is a required property" in body
