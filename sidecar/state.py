"""The objects one sidecar process shares between requests, built once by ``make_app``."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

from sidecar.budgets import Budgets
from sidecar.closed_loop import SaturationGate
from sidecar.discovery import EngineFacts
from sidecar.kv_budget import KvBudget
from sidecar.metrics import Metrics
from sidecar.model_profiles import ModelProfile
from sidecar.pricing import Pricer
from sidecar.settings import DownscaleMethod, Mode, OverBudgetAction, Settings


def budgets_from_settings(settings: Settings, profile: ModelProfile) -> Budgets:
    """The pure decision's view of the operator's limits."""
    max_prompt = settings.max_request_prompt_tokens or profile.max_position_embeddings or None
    return Budgets(
        max_images_per_request=settings.max_images_per_request,
        max_image_pixels=settings.max_image_pixels,
        max_image_tokens=settings.max_image_tokens,
        max_request_visual_tokens=settings.max_request_visual_tokens,
        max_request_prompt_tokens=max_prompt,
        max_request_kv_bytes=(
            int(settings.max_request_kv_bytes) if settings.max_request_kv_bytes else None
        ),
        # An ``auto`` budget stays off until vLLM's pool has been read (see discovery).
        kv_budget_bytes=0
        if isinstance(settings.kv_budget_bytes, str)
        else settings.kv_budget_bytes,
        downscale=settings.over_budget_action is OverBudgetAction.DOWNSCALE,
        downscale_with_processor_kwargs=(
            settings.downscale_method is DownscaleMethod.PROCESSOR_KWARGS
        ),
    )


@dataclass(slots=True)
class SidecarState:
    """Everything a request handler needs."""

    settings: Settings
    profile: ModelProfile
    budgets: Budgets
    ledger: KvBudget
    metrics: Metrics
    pricer: Pricer
    downscale_executor: ThreadPoolExecutor
    logger: Any
    saturation: SaturationGate
    upstream_base: str = field(init=False)  # SIDECAR_UPSTREAM_URL without its trailing slash
    session: aiohttp.ClientSession | None = None
    engine_facts: EngineFacts | None = None
    draining: bool = False

    @property
    def shadow(self) -> bool:
        """Predict and record only; never reject, queue or rewrite."""
        return self.settings.mode is Mode.SHADOW

    @property
    def client(self) -> aiohttp.ClientSession:
        """The shared upstream session (open between start-up and shutdown)."""
        if self.session is None:
            raise RuntimeError("the upstream session is not open")
        return self.session

    def __post_init__(self) -> None:
        self.upstream_base = str(self.settings.upstream_url).rstrip("/")

    def upstream_url(self, path_qs: str) -> str:
        """vLLM's URL for the same path and query."""
        return self.upstream_base + path_qs

    def watch_ledger(self) -> None:
        """Export the ledger's live state: the gauges read it at scrape time."""
        model = self.metrics.model
        ledger = self.ledger
        self.metrics.inflight_requests.labels(model).set_function(lambda: ledger.inflight_requests)
        self.metrics.inflight_kv_bytes.labels(model).set_function(lambda: ledger.inflight_bytes)
        self.metrics.queue_depth.labels(model).set_function(lambda: ledger.queue_depth)


STATE = web.AppKey("state", SidecarState)
