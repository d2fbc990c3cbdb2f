"""search: the largest whole number a monotone test accepts, by binary search."""

from __future__ import annotations

import random

from sidecar.search import largest_that_fits


def test_largest_that_fits_finds_the_last_accepted_number() -> None:
    assert largest_that_fits(0, 100, lambda n: n * n <= 50) == 7
    assert largest_that_fits(0, 100, lambda n: True) == 100
    assert largest_that_fits(5, 5, lambda n: True) == 5


def test_largest_that_fits_is_none_when_even_the_lowest_does_not_fit() -> None:
    assert largest_that_fits(1, 100, lambda n: n > 1_000) is None


def test_largest_that_fits_agrees_with_a_linear_scan_and_asks_few_questions() -> None:
    rng = random.Random(7)
    for _ in range(500):
        low = rng.randint(-50, 50)
        high = low + rng.randint(0, 3_000)
        threshold = rng.randint(low - 5, high + 5)
        asked: list[int] = []

        def fits(n: int, threshold: int = threshold, asked: list[int] = asked) -> bool:
            asked.append(n)
            return n <= threshold

        expected = max((n for n in range(low, high + 1) if n <= threshold), default=None)
        assert largest_that_fits(low, high, fits) == expected
        assert len(asked) <= (high - low + 1).bit_length() + 1
