"""The largest whole number a monotone test accepts: how a budget is turned back into a size.

A budget is a limit on a cost that grows with some quantity (image tokens with the total
of an image's sides, KV bytes with tokens, tokens with ``max_pixels``). Inverting it means
finding the largest quantity whose cost still fits, which a binary search finds exactly
with a logarithmic number of cost evaluations.
"""

from __future__ import annotations

from collections.abc import Callable


def largest_that_fits(low: int, high: int, fits: Callable[[int], bool]) -> int | None:
    """The largest ``n`` in ``[low, high]`` with ``fits(n)``, for ``fits`` true up to a point.

    None when even ``low`` does not fit.
    """
    if not fits(low):
        return None
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low
