"""The stand-in under test answers with fixed token counts (``tests.support.standin_helpers``)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from sidecar.standin import StandinServer, run_standin
from tests.support.standin_helpers import CONFIG


@pytest.fixture
async def standin() -> AsyncIterator[StandinServer]:
    """Overrides ``tests/conftest.py``'s: a stand-in with ``CONFIG`` on a free loopback port."""
    async with run_standin(CONFIG) as server:
        yield server
