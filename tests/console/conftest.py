"""The browser fixture of the console's tests (tests/console/browser.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.console.browser import chromium_session


@pytest.fixture
def browser() -> Iterator[Any]:
    """A headless chromium WebDriver session, quit at teardown."""
    with chromium_session() as session:
        yield session
