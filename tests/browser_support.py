"""A real headless Chromium for the tests that attack or drive a page (selenium).

`needs_chromium` skips a module only when Chromium or its driver is not installed
(`scripts/bootstrap` installs the Debian packages `chromium` and `chromium-driver`). The
browser resolves `rebound.test` to 127.0.0.1: the name an attacker's DNS re-points at the
user's own machine, after the page under that name was loaded (DNS rebinding).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
REBOUND = "rebound.test"

needs_chromium = pytest.mark.skipif(
    CHROMIUM is None or DRIVER is None,
    reason="Chromium is not installed (apt-get install chromium chromium-driver;"
    " scripts/bootstrap does it)",
)


@contextmanager
def chromium(width: int = 1500, height: int = 900) -> Iterator[Any]:
    """A headless Chromium (a selenium `WebDriver`), quit on the way out."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    flags = ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu")
    for flag in (*flags, f"--window-size={width},{height}"):
        options.add_argument(flag)
    options.add_argument(f"--host-resolver-rules=MAP {REBOUND} 127.0.0.1")
    driver = webdriver.Chrome(service=Service(str(DRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()
