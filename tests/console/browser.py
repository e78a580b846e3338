"""Debian's chromium, headless, driven by Selenium through Debian's chromedriver: the console's
pages as a user's browser renders them (JavaScript included).

No silent skip: without chromium or chromedriver the fixture fails, naming the install step.
Screenshots go to $ODRADEK_CONSOLE_SCREENSHOTS (the docs' images: docs/img) when it is set.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

SCREENSHOTS_ENV = "ODRADEK_CONSOLE_SCREENSHOTS"
CHROMIUM = "chromium"
CHROMEDRIVER = "chromedriver"


@contextmanager
def chromium_session() -> Iterator[Any]:
    """A headless chromium WebDriver session, quit at the end."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, driver = shutil.which(CHROMIUM), shutil.which(CHROMEDRIVER)
    if chromium is None or driver is None:
        pytest.fail("chromium and chromedriver are needed (Debian's chromium and chromium-driver: "
                    "bash scripts/install-system-deps)")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1400,1000"):
        options.add_argument(arg)
    session = webdriver.Chrome(service=Service(executable_path=driver), options=options)
    session.set_page_load_timeout(60)
    try:
        yield session
    finally:
        session.quit()


def text_of(browser: Any, element_id: str) -> str:
    from selenium.webdriver.common.by import By

    return browser.find_element(By.ID, element_id).text.strip()


def until(check: Callable[[], Any], what: str, timeout: float = 30.0, interval: float = 0.2) -> Any:
    """Poll `check` until it returns something truthy (bounded); that value."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"{what}: not within {timeout}s (last: {last!r})")


def screenshot(browser: Any, name: str) -> None:
    """docs/img/console-<name>.png when $ODRADEK_CONSOLE_SCREENSHOTS names a directory."""
    where = os.environ.get(SCREENSHOTS_ENV)
    if where:
        Path(where).mkdir(parents=True, exist_ok=True)
        assert browser.save_screenshot(str(Path(where) / f"console-{name}.png"))
