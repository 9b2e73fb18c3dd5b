"""Headless Chromium for the browser tests (Debian `chromium` + `chromium-driver`, driven by
selenium): one check that skips the calling test module, with the reason, when any of them
is missing, and one way to start the browser."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1400,1000",
)


def _binaries() -> tuple[str, str] | None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (chromium, driver) if chromium and driver else None


def require_chromium() -> None:
    """At a test module's top: skip the module unless Chromium, its driver and selenium are
    all there."""
    if _binaries() is None:
        pytest.skip(
            "headless Chromium not installed (apt-get install chromium chromium-driver)",
            allow_module_level=True,
        )
    pytest.importorskip("selenium.webdriver", reason="selenium not installed (dev extra)")


@contextmanager
def chromium(profile: Path, *, console_log: bool = False) -> Iterator[Any]:
    """A headless Chromium WebDriver with its own profile folder (`console_log`: keep the
    page's console messages for `get_log("browser")`); quit on exit."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    found = _binaries()
    assert found is not None, "call require_chromium() first"
    options = webdriver.ChromeOptions()
    options.binary_location = found[0]
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    if console_log:
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    browser = webdriver.Chrome(options=options, service=Service(executable_path=found[1]))
    browser.set_page_load_timeout(60)
    try:
        yield browser
    finally:
        browser.quit()
