"""A hold on new requests while vLLM reports that it is saturated.

While ``vllm:kv_cache_usage_perc >= SIDECAR_SATURATION_KV_USAGE`` or
``vllm:num_requests_waiting >= SIDECAR_SATURATION_WAITING_REQUESTS``, new requests wait
(up to ``SIDECAR_QUEUE_TIMEOUT_SECONDS``, then 429) instead of joining vLLM's queue, where
they would hold nothing back. Sheddable requests (negative priority) are refused at once
instead: under saturation they go first. Requests already in flight are never affected.
The gate only reads load figures; ``engine`` decides when to read them.
"""

from __future__ import annotations

import asyncio
import contextlib

from sidecar.errors import EngineSaturatedError, ShedError


class SaturationGate:
    """Open while vLLM has room; closed while it reports saturation."""

    def __init__(self, kv_usage_threshold: float | None, waiting_threshold: int | None) -> None:
        self._kv_usage_threshold = kv_usage_threshold
        self._waiting_threshold = waiting_threshold
        self._open = asyncio.Event()
        self._open.set()
        self.reason = ""
        self.waiting = 0  # requests held right now

    @property
    def saturated(self) -> bool:
        """Whether new requests are being held."""
        return not self._open.is_set()

    def update(self, kv_cache_usage: float | None, requests_waiting: float | None) -> None:
        """Open or close the gate from the latest load figures (None: not reported)."""
        reasons = []
        usage_limit, waiting_limit = self._kv_usage_threshold, self._waiting_threshold
        if usage_limit is not None and kv_cache_usage is not None and kv_cache_usage >= usage_limit:
            reasons.append(
                f"vllm:kv_cache_usage_perc is {kv_cache_usage:.2f}, at or above "
                f"SIDECAR_SATURATION_KV_USAGE {usage_limit:g}"
            )
        if (
            waiting_limit is not None
            and requests_waiting is not None
            and requests_waiting >= waiting_limit
        ):
            reasons.append(
                f"vllm:num_requests_waiting is {requests_waiting:g}, at or above "
                f"SIDECAR_SATURATION_WAITING_REQUESTS {waiting_limit}"
            )
        self.reason = "; ".join(reasons)
        if reasons:
            self._open.clear()
        else:
            self._open.set()

    async def wait(self, timeout_seconds: float, *, sheddable: bool = False) -> None:
        """Return once vLLM has room; EngineSaturatedError (429) after the timeout, or
        ShedError (429) at once for a sheddable request."""
        if self._open.is_set():
            return
        if sheddable:
            raise ShedError(
                f"vLLM is saturated ({self.reason}), and the request is sheddable: refused "
                "at once rather than held",
                retry_after_seconds=max(1, round(timeout_seconds)),
            )
        self.waiting += 1
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout_seconds):
                    await self._open.wait()
                    return
        finally:
            self.waiting -= 1
        raise EngineSaturatedError(
            f"vLLM is saturated ({self.reason}) and stayed so for {timeout_seconds:g} s; "
            "retry later",
            retry_after_seconds=max(1, round(timeout_seconds)),
        )
