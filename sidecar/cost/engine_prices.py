"""Engine-calibrated image prices: vLLM's own count for each distinct size, asked once.

``EnginePrices`` holds a bounded memo of what vLLM answered for a priced shape (width x
height after orientation, and the request's pixel range where it carries one) and asks for
the shapes it does not know, through an injected ``ask`` (``sidecar.engine.counts``
sends vLLM's ``POST /tokenize`` a synthetic image of the size). The asking is bounded so that
a client sending thousands of distinct sizes cannot turn the sidecar into load on vLLM's API
server:

- at most ``concurrency`` calls at once, the same shape asked once however many wait for it;
- at most ``calls_per_second`` on average, with a burst of as many (a token bucket); a shape
  that finds the bucket empty is not asked at all;
- an answer is waited for at most ``timeout_seconds`` (not at all in shadow mode); a late
  answer is still memoised;
- at most ``memo_entries`` shapes are kept, the least recently used forgotten first.

A shape vLLM refuses (aspect ratio, pixel limit) is memoised as that refusal, with vLLM's
message. ``image_prompt_tokens`` answers None when vLLM's count cannot be had within the
bounds; the pricer then prices the image at its upper bound (``upper_bound``), so nothing
reaches vLLM unpriced and no budget is breached.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from sidecar.vision import ImageTokens

ShapeKey = tuple[int, int, int | None, int | None]  # width, height, min_pixels, max_pixels


@dataclass(frozen=True, slots=True)
class EngineCount:
    """vLLM's answer for one shape: the prompt positions one image of it adds (its template
    tokens included), or vLLM's refusal of the size, in vLLM's words."""

    prompt_tokens: int | None
    refusal: str | None = None

    def __post_init__(self) -> None:
        if (self.prompt_tokens is None) == (self.refusal is None):
            raise ValueError("an engine count is either a token count or a refusal")


def engine_image_tokens(count: int, wrapper_tokens: int) -> ImageTokens:
    """vLLM's count of one image (its template tokens included) as ``ImageTokens``, the rule's
    wrapper share (``wrapper_tokens``) kept apart so visual tokens mean the same either way."""
    wrapper = min(wrapper_tokens, count)
    return ImageTokens(tokens=count - wrapper, wrapper_tokens=wrapper)


class EngineCountUnavailable(Exception):
    """vLLM gave no usable answer (down, timed out, no ``/tokenize``, a 5xx): nothing to
    memoise; the shape is asked again next time."""


Ask = Callable[[int, int, int | None, int | None], Awaitable[EngineCount]]


# What became of one lookup: remembered, asked and counted, asked and refused, asked with no
# answer, or priced at the upper bound (the rate spent, or the answer later than the timeout).
CALIBRATION_OUTCOMES = ("hit", "answered", "refused", "failed", "bounded")


@dataclass(slots=True)
class CalibrationStats:
    """What the memo did since start-up; ``calls`` counts the asks sent to vLLM."""

    hits: int = 0
    calls: int = 0
    answered: int = 0
    refused: int = 0
    failed: int = 0
    bounded: int = 0

    def add(self, outcome: str) -> None:
        """Count one outcome (a name from ``CALIBRATION_OUTCOMES``; ``hit`` counts ``hits``)."""
        name = "hits" if outcome == "hit" else outcome
        setattr(self, name, getattr(self, name) + 1)


class EnginePrices:
    """The memo of vLLM's counts and the bounded asking; one per sidecar, on its event loop."""

    def __init__(
        self,
        ask: Ask,
        *,
        upper_bound: ImageTokens,
        memo_entries: int = 4096,
        concurrency: int = 2,
        calls_per_second: float = 20.0,
        timeout_seconds: float = 5.0,
        wait_for_answers: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if memo_entries < 1 or concurrency < 1 or calls_per_second <= 0 or timeout_seconds <= 0:
            raise ValueError("engine calibration bounds must be positive")
        self._ask = ask
        self.upper_bound = upper_bound
        self.active = False  # whether images are priced through the engine now
        self.memo_entries = memo_entries
        self.calls_per_second = calls_per_second
        self.timeout_seconds = timeout_seconds
        # False (shadow mode): a new shape is asked in the background and priced at the
        # bound at once, so that observing never delays traffic.
        self.wait_for_answers = wait_for_answers
        self._clock = clock
        self._memo: OrderedDict[ShapeKey, EngineCount] = OrderedDict()
        self._pending: dict[ShapeKey, asyncio.Task[EngineCount | None]] = {}
        self._slots = asyncio.Semaphore(concurrency)
        self._tokens = calls_per_second  # the bucket starts full: one second's burst
        self._refilled_at = clock()
        self.stats = CalibrationStats()
        self.on_outcome: Callable[[str], None] = lambda _outcome: None  # the metrics' hook

    def __len__(self) -> int:
        return len(self._memo)

    def known(
        self,
        width_px: int,
        height_px: int,
        pixel_range: tuple[int | None, int | None] = (None, None),
    ) -> EngineCount | None:
        """The memoised answer for a shape, or None; counts as a use for the LRU order."""
        key = (width_px, height_px, *pixel_range)
        count = self._memo.get(key)
        if count is not None:
            self._memo.move_to_end(key)
        return count

    async def image_prompt_tokens(
        self,
        width_px: int,
        height_px: int,
        pixel_range: tuple[int | None, int | None] = (None, None),
    ) -> EngineCount | None:
        """vLLM's count for the shape: memoised, or asked within the bounds and waited for;
        None when it cannot be had in time (price at ``upper_bound``)."""
        key: ShapeKey = (width_px, height_px, *pixel_range)
        count = self._memo.get(key)
        if count is not None:
            self._memo.move_to_end(key)
            self._count("hit")
            return count
        task = self._pending.get(key)
        if task is None:
            if not self._take_token():
                self._count("bounded")
                return None
            task = self._pending[key] = asyncio.create_task(self._calibrate(key))
            task.add_done_callback(lambda _: self._pending.pop(key, None))
        try:
            timeout = self.timeout_seconds if self.wait_for_answers else 0
            answer = await asyncio.wait_for(asyncio.shield(task), timeout)
        except TimeoutError:
            answer = None
        if answer is None:
            self._count("bounded")
        return answer

    def remember(self, entries: Iterable[tuple[ShapeKey, EngineCount]]) -> None:
        """Add answers kept from before (a persisted memo), oldest first."""
        for key, count in entries:
            self._store(key, count)

    def entries(self) -> list[tuple[ShapeKey, EngineCount]]:
        """The memo, least recently used first, to persist."""
        return list(self._memo.items())

    def forget(self) -> None:
        """Drop every answer: the engine restarted and may count otherwise now."""
        self._memo.clear()

    async def close(self) -> None:
        """Cancel calibrations still running."""
        tasks = list(self._pending.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _take_token(self) -> bool:
        now = self._clock()
        elapsed, self._refilled_at = now - self._refilled_at, now
        self._tokens = min(self.calls_per_second, self._tokens + elapsed * self.calls_per_second)
        if self._tokens < 1:
            return False
        self._tokens -= 1
        return True

    async def _calibrate(self, key: ShapeKey) -> EngineCount | None:
        async with self._slots:
            self.stats.calls += 1
            try:
                count = await self._ask(*key)
            except EngineCountUnavailable:
                self._count("failed")
                return None
        self._count("answered" if count.refusal is None else "refused")
        self._store(key, count)
        return count

    def _count(self, outcome: str) -> None:
        self.stats.add(outcome)
        self.on_outcome(outcome)

    def _store(self, key: ShapeKey, count: EngineCount) -> None:
        self._memo[key] = count
        self._memo.move_to_end(key)
        while len(self._memo) > self.memo_entries:
            self._memo.popitem(last=False)
