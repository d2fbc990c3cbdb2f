"""An asyncio event loop on a virtual clock: timers fire in order, at once, the same every run.

``loop.time()`` is a counter, not the wall clock. Whenever the loop would block waiting for its
next timer, the clock jumps to it instead; every other turn of the loop costs one ``tick`` of
virtual time, so a task that polls with ``asyncio.sleep(0)`` cannot stop time either. Sleeps,
``asyncio.timeout``, ``call_later`` and ``call_at`` all read this clock, so a test built from
them and a seeded random generator interleaves its tasks identically on every run and on any
machine, however loaded: nothing depends on how long real work takes.

Only public asyncio API is used: ``SelectorEventLoop(selector)`` and ``time()``. Real I/O still
works (the selector below wraps a real one, polled without blocking), but it takes no virtual
time, so a test of I/O readiness should not use this loop.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TypeVar

T = TypeVar("T")


class VirtualClock:
    """Seconds since the loop started, advanced only by the loop itself."""

    def __init__(self, tick_seconds: float) -> None:
        self.now = 0.0
        self.tick_seconds = tick_seconds


class _AdvancingSelector(selectors.BaseSelector):
    """A real selector, never blocked on: its would-be wait moves the clock instead."""

    def __init__(self, clock: VirtualClock) -> None:
        self._clock = clock
        self._real = selectors.DefaultSelector()

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._real.unregister(fileobj)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = self._real.select(0)
        if ready:
            return ready
        if timeout is None:  # nothing ready, no timer: a real loop would wait forever
            raise RuntimeError("deadlock: every task waits and no timer is scheduled")
        self._clock.now += max(timeout, self._clock.tick_seconds)
        return []

    def close(self) -> None:
        self._real.close()

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return self._real.get_map()


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """A selector event loop whose ``time()`` is a ``VirtualClock``."""

    def __init__(self, tick_seconds: float = 1e-4) -> None:
        self.clock = VirtualClock(tick_seconds)
        super().__init__(_AdvancingSelector(self.clock))

    def time(self) -> float:
        return self.clock.now


def run_in_virtual_time(
    main: Callable[[], Coroutine[Any, Any, T]], *, tick_seconds: float = 1e-4
) -> T:
    """Run ``main()`` to completion on a fresh ``VirtualTimeLoop`` and close it."""
    with asyncio.Runner(loop_factory=lambda: VirtualTimeLoop(tick_seconds)) as runner:
        return runner.run(main())
