"""Shared fixtures: a stand-in for vLLM and a sidecar in front of it, all on 127.0.0.1.

Every test is also marked with its tier, the folder it lives in (``unit``, ``e2e``, ``oracle``,
``fuzz``, ``deploy``, ``sdk``, ``docs``), so ``-m`` can pick tiers as well as paths:
``pytest tests/unit`` or ``pytest -m unit`` is the fast tier. ``tests/real_vllm`` marks its own
(``real_vllm``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import structlog
from prometheus_client import CollectorRegistry

from sidecar.serve.server import RunningSidecar, running_sidecar
from sidecar.settings import Settings
from sidecar.standin import StandinConfig, StandinServer, run_standin
from tests.support.sidecars import MODEL_ALIAS, QWEN, SidecarFactory

TESTS = Path(__file__).resolve().parent
TIERS = ("unit", "e2e", "oracle", "fuzz", "deploy", "sdk", "docs")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with its tier: the first folder under ``tests/``."""
    for item in items:
        path = item.path.resolve()
        if path.is_relative_to(TESTS) and (folder := path.relative_to(TESTS).parts[0]) in TIERS:
            item.add_marker(folder)


@pytest.fixture(autouse=True)
def _fresh_logging() -> Iterator[None]:
    """CLI commands configure structlog for the whole process; undo it after each test."""
    yield
    structlog.reset_defaults()


@pytest.fixture
async def standin() -> AsyncIterator[StandinServer]:
    """A stand-in vLLM on a free loopback port."""
    config = StandinConfig(served_model_name=QWEN, model_aliases=(MODEL_ALIAS,))
    async with run_standin(config) as server:
        yield server


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    """A client session for talking to the sidecar."""
    async with aiohttp.ClientSession() as client:
        yield client


@pytest.fixture
async def make_sidecar(standin: StandinServer) -> AsyncIterator[SidecarFactory]:
    """Start sidecars in front of the stand-in; each gets its own registry and free ports."""
    async with AsyncExitStack() as stack:

        async def start(upstream_url: str | None = None, **overrides: Any) -> RunningSidecar:
            settings = Settings(
                model=overrides.pop("model", QWEN),
                upstream_url=upstream_url or standin.url,
                listen_host="127.0.0.1",
                port=0,
                metrics_port=0,
                **overrides,
            )
            return await stack.enter_async_context(
                running_sidecar(settings, registry=CollectorRegistry())
            )

        yield start
