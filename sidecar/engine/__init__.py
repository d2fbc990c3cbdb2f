"""Learn the engine's real limits from vLLM itself, at start-up and periodically, and
what they change in the budgets.

- ``GET /v1/models`` gives ``max_model_len``: the default prompt budget.
- ``GET /metrics`` gives ``vllm:cache_config_info``: ``num_gpu_blocks x block_size`` is the
  KV pool in tokens (per GPU, since each tensor-parallel rank holds the same blocks of
  its own heads), and ``cache_dtype``; and the live load: ``vllm:kv_cache_usage_perc``
  and ``vllm:num_requests_waiting``.

The engine may not be up when the sidecar starts (vLLM loads weights for minutes): the
poller retries with exponential backoff and never fails the sidecar. Parsing and
``budgets_after`` are pure; ``EngineWatcher`` is the thin async loop that reads, and the
serving shell applies what it read.

Policy (documented in docs/closing-the-loop.md):

- ``SIDECAR_KV_BUDGET_BYTES=auto[:FRACTION]``: the in-flight budget becomes
  ``num_gpu_blocks x bytes per block x FRACTION`` (``KvGeometry.bytes_per_block`` in vLLM's
  reported ``block_size``: a page in each layer of the largest KV-cache group, which is
  not ``block_size x`` per-token bytes for Gemma 3's sliding and full groups nor for a
  hybrid's recurrent-state pages), re-read every poll, so a restarted engine with a new
  pool size is followed. Until the first read it is off.
- ``SIDECAR_MAX_REQUEST_PROMPT_TOKENS`` unset: the prompt budget is vLLM's
  ``max_model_len`` once read (the model's position limit before that).
- ``SIDECAR_BLOCK_SIZE_TOKENS`` unset: KV is priced in vLLM's own ``block_size`` once read
  (16, vLLM's class default, before that). The attention backend may choose another size:
  vLLM on CPU uses 128, and a block-size mismatch misprices every request's rounding.
  A hybrid model's reported size is final (its alignment to the recurrent state applied),
  its ``mamba_cache_mode`` says whether prefix caching holds checkpoint blocks, and a size
  that is no multiple of 64 says the GDN layers export no prefill checkpoints.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, replace

import aiohttp
import orjson
from prometheus_client.parser import text_string_to_metric_families

from sidecar.admission.budgets import Budgets
from sidecar.errors import ConfigurationError
from sidecar.profiles import ModelProfile, kv_cache_dtype_bytes
from sidecar.profiles.kv_geometry import GDN_PREFILL_CHECKPOINT_TOKENS, KvGeometry

FIRST_RETRY_SECONDS = 0.5
READ_TIMEOUT_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class EngineFacts:
    """What vLLM reported about itself; None where it said nothing."""

    max_model_len: int | None = None
    num_gpu_blocks: int | None = None
    block_size: int | None = None
    cache_dtype: str | None = None
    kv_cache_usage_perc: float | None = None
    num_requests_waiting: float | None = None
    data_parallel_engines: int | None = None  # engines with a vllm:cache_config_info series
    mamba_cache_mode: str | None = None  # "align" with prefix caching on, else "none"
    model_name: str | None = None  # the served model name on vLLM's load gauges

    @property
    def kv_capacity_tokens(self) -> int | None:
        """Tokens the KV pool holds: num_gpu_blocks x block_size, every engine's together."""
        if self.num_gpu_blocks is None or self.block_size is None:
            return None
        return self.num_gpu_blocks * self.block_size


def parse_models(body: bytes) -> int | None:
    """``max_model_len`` of the base model in a ``/v1/models`` answer (LoRA cards have none)."""
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    cards = document.get("data") if isinstance(document, dict) else None
    for card in cards if isinstance(cards, list) else []:
        value = card.get("max_model_len") if isinstance(card, dict) else None
        if isinstance(value, int) and value > 0:
            return value
    return None


def parse_engine_metrics(text: str) -> EngineFacts:
    """The cache configuration and live load from vLLM's Prometheus exposition."""
    blocks: list[int] = []
    block_sizes: list[int] = []
    dtypes: list[str] = []
    mamba_modes: list[str] = []
    usage: list[float] = []
    engines: set[str] = set()
    model_names: list[str] = []
    waiting = 0.0
    saw_waiting = False
    try:
        families = list(text_string_to_metric_families(text))
    except ValueError:
        return EngineFacts()
    for family in families:
        for sample in family.samples:
            if sample.name == "vllm:cache_config_info":
                labels = sample.labels
                if labels.get("num_gpu_blocks", "").isdigit():
                    blocks.append(int(labels["num_gpu_blocks"]))
                if labels.get("block_size", "").isdigit():
                    block_sizes.append(int(labels["block_size"]))
                if labels.get("cache_dtype"):
                    dtypes.append(labels["cache_dtype"])
                if labels.get("mamba_cache_mode"):
                    mamba_modes.append(labels["mamba_cache_mode"])
                engines.add(labels.get("engine", ""))
            elif sample.name == "vllm:kv_cache_usage_perc":
                usage.append(sample.value)
            elif sample.name == "vllm:num_requests_waiting":
                waiting += sample.value
                saw_waiting = True
                if sample.labels.get("model_name"):
                    model_names.append(sample.labels["model_name"])
    # vLLM's frontend sums num_gpu_blocks over its data-parallel engines and repeats that sum
    # on every engine's vllm:cache_config_info series: the largest value is the whole pod's.
    return EngineFacts(
        num_gpu_blocks=max(blocks) if blocks else None,
        block_size=max(block_sizes) if block_sizes else None,
        cache_dtype=dtypes[0] if dtypes else None,
        kv_cache_usage_perc=max(usage) if usage else None,
        num_requests_waiting=waiting if saw_waiting else None,
        data_parallel_engines=len(engines) if engines else None,
        mamba_cache_mode=mamba_modes[0] if mamba_modes else None,
        model_name=model_names[0] if model_names else None,
    )


async def read_engine_facts(session: aiohttp.ClientSession, base_url: str) -> EngineFacts:
    """One round of discovery; raises aiohttp.ClientError or TimeoutError when vLLM is down."""
    timeout = aiohttp.ClientTimeout(total=READ_TIMEOUT_SECONDS)
    async with session.get(f"{base_url}/v1/models", timeout=timeout) as response:
        response.raise_for_status()
        max_model_len = parse_models(await response.read())
    async with session.get(f"{base_url}/metrics", timeout=timeout) as response:
        response.raise_for_status()
        facts = parse_engine_metrics((await response.read()).decode("utf-8", "replace"))
    return replace(facts, max_model_len=max_model_len)


class EngineWatcher:
    """Polls vLLM every ``interval_seconds``; backs off from 0.5 s while it is unreachable.
    ``on_connected`` runs after the first successful round and after the first one following
    a failure: vLLM came up, or came back (a restart)."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        base_url: str,
        *,
        interval_seconds: float,
        on_facts: Callable[[EngineFacts], None],
        on_failure: Callable[[str], None],
        on_connected: Callable[[], None] | None = None,
    ) -> None:
        self._session = session
        self._on_connected = on_connected
        self._connected = False
        self._base_url = base_url.rstrip("/")
        self._interval_seconds = interval_seconds
        self._on_facts = on_facts
        self._on_failure = on_failure
        self._task: asyncio.Task[None] | None = None
        self.rounds = 0

    def start(self) -> None:
        """Begin polling in the background."""
        self._task = asyncio.create_task(self._run(), name="engine-watcher")

    async def stop(self) -> None:
        """Stop polling."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        retry_seconds = FIRST_RETRY_SECONDS
        while True:
            try:
                facts = await read_engine_facts(self._session, self._base_url)
            except (aiohttp.ClientError, TimeoutError) as exc:
                self._on_failure(f"{type(exc).__name__}: {exc}")
                self._connected = False
                await asyncio.sleep(min(retry_seconds, self._interval_seconds))
                retry_seconds *= 2
                continue
            retry_seconds = FIRST_RETRY_SECONDS
            self.rounds += 1
            self._on_facts(facts)
            if not self._connected:
                # The first answer, or the first since vLLM stopped answering (a restart).
                self._connected = True
                if self._on_connected is not None:
                    self._on_connected()
            await asyncio.sleep(self._interval_seconds)


def budgets_after(
    budgets: Budgets,
    facts: EngineFacts,
    *,
    auto_kv_fraction: float | None,
    kv_bytes_per_block: int,
    prompt_budget_from_engine: bool,
) -> Budgets:
    """The budgets once ``facts`` are applied: the ``auto`` KV budget from vLLM's pool of
    ``num_gpu_blocks`` blocks of ``kv_bytes_per_block`` (every data-parallel engine's, with
    the engine count vLLM reports), and the prompt budget from its ``max_model_len`` when
    the operator set none."""
    if facts.data_parallel_engines is not None:
        budgets = replace(budgets, kv_budget_engines=facts.data_parallel_engines)
    if auto_kv_fraction is not None and facts.num_gpu_blocks is not None:
        pool_bytes = facts.num_gpu_blocks * kv_bytes_per_block
        budgets = replace(budgets, kv_budget_bytes=int(pool_bytes * auto_kv_fraction))
    if prompt_budget_from_engine and facts.max_model_len is not None:
        budgets = replace(budgets, max_request_prompt_tokens=facts.max_model_len)
    return budgets


def kv_geometry_after(
    kv: KvGeometry, facts: EngineFacts, *, block_size_from_engine: bool
) -> KvGeometry:
    """The KV geometry once ``facts`` are applied: vLLM's ``block_size`` when the operator set
    none (``block_size_from_engine``) and vLLM reported one; for a hybrid model also vLLM's
    ``mamba_cache_mode`` (prefix caching) and what the block size says about GDN prefill
    checkpoints (their 64-token grid divides every block size vLLM chooses with them); else
    ``kv`` unchanged."""
    updated = kv
    if kv.has_recurrent_state and facts.mamba_cache_mode in ("align", "none"):
        updated = replace(updated, prefix_caching=facts.mamba_cache_mode == "align")
    if block_size_from_engine and facts.block_size is not None and facts.block_size >= 1:
        if kv.has_recurrent_state:
            updated = replace(updated, block_size_is_final=True)
            if facts.block_size % GDN_PREFILL_CHECKPOINT_TOKENS:
                updated = replace(updated, prefill_checkpoint_tokens=None)
        if facts.block_size != kv.block_size_tokens:
            updated = replace(updated, block_size_tokens=facts.block_size)
    return kv if updated == kv else updated


def cache_dtype_differs(facts: EngineFacts, profile: ModelProfile) -> bool:
    """Whether vLLM reports a KV cache element size other than the profile's."""
    if facts.cache_dtype is None:
        return False
    try:
        engine_bytes = kv_cache_dtype_bytes(facts.cache_dtype, profile.model_dtype_bytes)
    except ConfigurationError:
        return False  # a dtype the sidecar does not know: nothing to compare
    return engine_bytes != profile.kv.dtype_bytes
