"""Apply what vLLM reports about itself: the auto KV budget, the context length, and a
hold on new requests while the engine is saturated.

Policy (documented in README, "Closing the loop"):

- ``SIDECAR_KV_BUDGET_BYTES=auto[:FRACTION]``: the in-flight budget becomes
  ``num_gpu_blocks x block_size x KV bytes per token x FRACTION``, re-read every poll, so
  a restarted engine with a new pool size is followed. Until the first read it is off.
- ``SIDECAR_MAX_REQUEST_PROMPT_TOKENS`` unset: the prompt budget is vLLM's
  ``max_model_len`` once read (the model's position limit before that).
- Saturation: while ``vllm:kv_cache_usage_perc >= SIDECAR_SATURATION_KV_USAGE`` or
  ``vllm:num_requests_waiting >= SIDECAR_SATURATION_WAITING_REQUESTS``, new requests wait
  (up to ``SIDECAR_QUEUE_TIMEOUT_SECONDS``, then 429) instead of joining vLLM's queue,
  where they would hold nothing back. Requests already in flight are never affected.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace
from typing import TYPE_CHECKING

from sidecar.discovery import EngineFacts
from sidecar.errors import ConfigurationError, EngineSaturatedError
from sidecar.model_profiles import kv_cache_dtype_bytes

if TYPE_CHECKING:
    from sidecar.state import SidecarState


class SaturationGate:
    """Open while vLLM has room; closed while it reports saturation."""

    def __init__(self, kv_usage_threshold: float | None, waiting_threshold: int | None) -> None:
        self._kv_usage_threshold = kv_usage_threshold
        self._waiting_threshold = waiting_threshold
        self._open = asyncio.Event()
        self._open.set()
        self.reason = ""

    @property
    def saturated(self) -> bool:
        """Whether new requests are being held."""
        return not self._open.is_set()

    def update(self, facts: EngineFacts) -> None:
        """Open or close the gate from the latest load figures."""
        reasons = []
        usage, waiting = facts.kv_cache_usage_perc, facts.num_requests_waiting
        usage_limit, waiting_limit = self._kv_usage_threshold, self._waiting_threshold
        if usage_limit is not None and usage is not None and usage >= usage_limit:
            reasons.append(
                f"vllm:kv_cache_usage_perc is {usage:.2f}, at or above "
                f"SIDECAR_SATURATION_KV_USAGE {usage_limit:g}"
            )
        if waiting_limit is not None and waiting is not None and waiting >= waiting_limit:
            reasons.append(
                f"vllm:num_requests_waiting is {waiting:g}, at or above "
                f"SIDECAR_SATURATION_WAITING_REQUESTS {waiting_limit}"
            )
        self.reason = "; ".join(reasons)
        if reasons:
            self._open.clear()
        else:
            self._open.set()

    async def wait(self, timeout_seconds: float) -> None:
        """Return once vLLM has room; OverloadedError (429) after the timeout."""
        if self._open.is_set():
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_seconds):
                await self._open.wait()
                return
        raise EngineSaturatedError(
            f"vLLM is saturated ({self.reason}) and stayed so for {timeout_seconds:g} s; "
            "retry later",
            retry_after_seconds=max(1, round(timeout_seconds)),
        )


def apply_engine_facts(state: SidecarState, facts: EngineFacts) -> None:
    """Update budgets, the ledger and the gate from one round of discovery."""
    state.engine_facts = facts
    settings = state.settings
    if facts.cache_dtype is not None:
        dtype_bytes = kv_cache_dtype_bytes_or_none(
            facts.cache_dtype, state.profile.model_dtype_bytes
        )
        if dtype_bytes is not None and dtype_bytes != state.profile.kv.dtype_bytes:
            state.logger.warning(
                "engine.kv_cache_dtype_differs",
                engine_cache_dtype=facts.cache_dtype,
                sidecar_dtype_bytes=state.profile.kv.dtype_bytes,
                hint="set SIDECAR_KV_CACHE_DTYPE to match vLLM's --kv-cache-dtype",
            )
    fraction = settings.kv_budget_auto_fraction()
    capacity = facts.kv_capacity_tokens
    if fraction is not None and capacity is not None and not state.shadow:
        total = int(capacity * state.profile.kv.bytes_per_token * fraction)
        if total != state.ledger.total_bytes:
            state.ledger.set_total_bytes(total)
            state.budgets = replace(state.budgets, kv_budget_bytes=total)
            state.logger.info("engine.kv_budget", kv_budget_bytes=total, kv_tokens=capacity)
    max_model_len = facts.max_model_len
    if settings.max_request_prompt_tokens is None and max_model_len is not None:
        state.budgets = replace(state.budgets, max_request_prompt_tokens=max_model_len)
    state.saturation.update(facts)


def kv_cache_dtype_bytes_or_none(cache_dtype: str, model_dtype_bytes: int) -> int | None:
    """Bytes per element of vLLM's reported ``cache_dtype``; None when unknown."""
    try:
        return kv_cache_dtype_bytes(cache_dtype, model_dtype_bytes)
    except ConfigurationError:
        return None
