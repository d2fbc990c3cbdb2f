"""cost.engine_prices: vLLM's counts asked once per shape, within the concurrency, rate, memo
and timeout bounds; refusals remembered; no answer priced at the bound."""

from __future__ import annotations

import asyncio

import pytest

from sidecar.cost.engine_prices import EngineCount, EngineCountUnavailable, EnginePrices
from sidecar.vision import ImageTokens

BOUND = ImageTokens(tokens=16_384, wrapper_tokens=2)


class FakeEngine:
    """Counts width x height / 784 + 2, refuses aspect ratios over 200, records every ask."""

    def __init__(self, *, delay_seconds: float = 0.0, down: bool = False) -> None:
        self.asked: list[tuple[int, int, int | None, int | None]] = []
        self.delay_seconds = delay_seconds
        self.down = down
        self.running = 0
        self.most_running = 0

    async def __call__(
        self, width: int, height: int, low: int | None, high: int | None
    ) -> EngineCount:
        self.asked.append((width, height, low, high))
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        try:
            await asyncio.sleep(self.delay_seconds)
            if self.down:
                raise EngineCountUnavailable("vLLM's /tokenize answered 503")
            if max(width, height) > 200 * min(width, height):
                return EngineCount(None, "absolute aspect ratio must be smaller than 200")
            return EngineCount(width * height // 784 + 2)
        finally:
            self.running -= 1


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def prices(engine: FakeEngine, **bounds: float) -> EnginePrices:
    return EnginePrices(engine, upper_bound=BOUND, **bounds)  # type: ignore[arg-type]


async def test_a_shape_is_asked_once_and_then_remembered() -> None:
    engine = FakeEngine()
    book = prices(engine)
    first = await book.image_prompt_tokens(1120, 784)
    second = await book.image_prompt_tokens(1120, 784)
    assert first == second == EngineCount(1122)
    assert engine.asked == [(1120, 784, None, None)]
    assert (book.stats.calls, book.stats.hits, len(book)) == (1, 1, 1)


async def test_requests_waiting_for_the_same_new_shape_share_one_call() -> None:
    engine = FakeEngine(delay_seconds=0.05)
    book = prices(engine)
    answers = await asyncio.gather(*(book.image_prompt_tokens(640, 480) for _ in range(20)))
    assert set(answers) == {EngineCount(640 * 480 // 784 + 2)}
    assert len(engine.asked) == 1


async def test_a_request_pixel_range_is_its_own_shape() -> None:
    engine = FakeEngine()
    book = prices(engine)
    await book.image_prompt_tokens(640, 480)
    await book.image_prompt_tokens(640, 480, (None, 200_704))
    assert engine.asked == [(640, 480, None, None), (640, 480, None, 200_704)]


async def test_a_refused_size_is_remembered_with_vllms_message() -> None:
    engine = FakeEngine()
    book = prices(engine)
    refused = await book.image_prompt_tokens(10_000, 10)
    assert refused == EngineCount(None, "absolute aspect ratio must be smaller than 200")
    assert await book.image_prompt_tokens(10_000, 10) == refused
    assert len(engine.asked) == 1
    assert book.stats.refused == 1


async def test_no_answer_is_not_remembered_and_prices_at_the_bound() -> None:
    engine = FakeEngine(down=True)
    book = prices(engine)
    assert await book.image_prompt_tokens(640, 480) is None
    assert len(book) == 0
    engine.down = False
    assert await book.image_prompt_tokens(640, 480) == EngineCount(393)
    assert len(engine.asked) == 2


async def test_a_late_answer_prices_at_the_bound_and_is_remembered_when_it_comes() -> None:
    engine = FakeEngine(delay_seconds=0.2)
    book = prices(engine, timeout_seconds=0.02)
    assert await book.image_prompt_tokens(640, 480) is None
    assert book.stats.bounded == 1
    await asyncio.sleep(0.3)
    assert book.known(640, 480) == EngineCount(393)


async def test_calls_never_exceed_the_concurrency() -> None:
    engine = FakeEngine(delay_seconds=0.01)
    book = prices(engine, concurrency=2, calls_per_second=1000)
    await asyncio.gather(*(book.image_prompt_tokens(100 + i, 100) for i in range(40)))
    assert engine.most_running == 2
    assert len(engine.asked) == 40


async def test_a_burst_of_distinct_sizes_asks_no_more_than_the_rate_allows() -> None:
    engine, clock = FakeEngine(), Clock()
    book = EnginePrices(engine, upper_bound=BOUND, calls_per_second=20, clock=clock)
    answers = await asyncio.gather(*(book.image_prompt_tokens(100 + i, 100) for i in range(1000)))
    assert len(engine.asked) == 20  # one second's burst
    assert sum(a is None for a in answers) == 980
    clock.now = 0.5  # half a second later: ten more
    await asyncio.gather(*(book.image_prompt_tokens(5000 + i, 100) for i in range(100)))
    assert len(engine.asked) == 30


async def test_the_memo_forgets_the_least_recently_used_first() -> None:
    engine = FakeEngine()
    book = prices(engine, memo_entries=2)
    await book.image_prompt_tokens(100, 100)
    await book.image_prompt_tokens(200, 200)
    await book.image_prompt_tokens(100, 100)  # used again: 200x200 is now the oldest
    await book.image_prompt_tokens(300, 300)
    assert book.known(100, 100) is not None
    assert book.known(200, 200) is None
    assert len(book) == 2


async def test_entries_round_trip_and_forget_drops_them() -> None:
    engine = FakeEngine()
    book = prices(engine)
    await book.image_prompt_tokens(100, 100)
    await book.image_prompt_tokens(10_000, 10)
    other = prices(FakeEngine())
    other.remember(book.entries())
    assert other.known(100, 100) == EngineCount(14)
    assert other.known(10_000, 10) is not None
    other.forget()
    assert len(other) == 0


def test_an_engine_count_is_a_count_or_a_refusal() -> None:
    with pytest.raises(ValueError, match="either"):
        EngineCount(None)
    with pytest.raises(ValueError, match="either"):
        EngineCount(5, "refused")


async def test_without_waiting_a_new_shape_is_bounded_at_once_and_learnt_behind() -> None:
    engine = FakeEngine(delay_seconds=0.05)
    book = EnginePrices(engine, upper_bound=BOUND, wait_for_answers=False)
    started = asyncio.get_running_loop().time()
    assert await book.image_prompt_tokens(640, 480) is None
    assert asyncio.get_running_loop().time() - started < 0.04
    await asyncio.sleep(0.1)
    assert await book.image_prompt_tokens(640, 480) == EngineCount(393)
    assert len(engine.asked) == 1
