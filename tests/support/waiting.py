"""Waiting for state that has no event to wait on: poll, and fail loudly on time-out.

``await eventually(condition)`` returns once ``condition()`` holds and raises ``AssertionError``
naming the condition when it still does not after ``timeout_seconds``; so a test writes
``await eventually(...)``, never ``assert await eventually(...)``.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable

POLL_SECONDS = 0.01


def _describe(condition: Callable[[], object]) -> str:
    """The source line of a lambda or function, else its repr."""
    try:
        return inspect.getsource(condition).strip()
    except (OSError, TypeError):
        return repr(condition)


async def eventually(condition: Callable[[], object], *, timeout_seconds: float = 3.0) -> None:
    """Poll ``condition`` until it is true; ``AssertionError`` if it is not within the time."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_seconds
    while not condition():
        if loop.time() >= deadline:
            raise AssertionError(f"still false after {timeout_seconds:g} s: {_describe(condition)}")
        await asyncio.sleep(POLL_SECONDS)


async def connection_refused(port: int) -> bool:
    """Whether a connection to 127.0.0.1:``port`` is refused right now (nothing listens)."""
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
    except ConnectionRefusedError:
        return True
    writer.close()
    await writer.wait_closed()
    return False


async def eventually_refused(port: int, *, timeout_seconds: float = 2.0) -> None:
    """Wait until connections to ``port`` are refused (the listener closed); ``AssertionError``
    if one is still accepted after ``timeout_seconds``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_seconds
    while not await connection_refused(port):
        if loop.time() >= deadline:
            raise AssertionError(
                f"port {port} still accepts connections after {timeout_seconds:g} s"
            )
        await asyncio.sleep(POLL_SECONDS)
