"""The operator's budgets, as the pure decision sees them, and the ones in force right now.

``Budgets`` is built once from ``Settings``. Two of its values may follow what vLLM reports
(see ``engine``): an ``auto`` in-flight KV budget, and the prompt budget when
``SIDECAR_MAX_REQUEST_PROMPT_TOKENS`` is unset. ``BudgetsInForce`` holds the current value;
each request reads it once, so one request never sees two sets of budgets.
"""

from __future__ import annotations

from dataclasses import dataclass

from sidecar.profiles import ModelProfile
from sidecar.settings import DownscaleMethod, OverBudgetAction, Settings


@dataclass(frozen=True, slots=True)
class Budgets:
    """The operator's limits; None means unlimited."""

    max_images_per_request: int | None = None
    max_image_pixels: int | None = None
    max_image_tokens: int | None = None
    max_request_visual_tokens: int | None = None
    max_request_prompt_tokens: int | None = None
    max_request_kv_bytes: int | None = None
    kv_budget_bytes: int = 0  # in flight, all requests; 0 turns it off
    # Data-parallel engines the budget spans, each with an equal share of it: one request
    # runs on one engine, so it must fit one share (kv_budget_bytes // kv_budget_engines).
    kv_budget_engines: int = 1
    downscale: bool = False
    downscale_with_processor_kwargs: bool = False

    @classmethod
    def from_settings(cls, settings: Settings, profile: ModelProfile) -> Budgets:
        """The limits a deployment starts with, before vLLM has been read."""
        max_prompt = settings.max_request_prompt_tokens or profile.max_position_embeddings
        return cls(
            max_images_per_request=settings.max_images_per_request,
            max_image_pixels=settings.max_image_pixels,
            max_image_tokens=settings.max_image_tokens,
            max_request_visual_tokens=settings.max_request_visual_tokens,
            max_request_prompt_tokens=max_prompt or None,
            max_request_kv_bytes=(
                int(settings.max_request_kv_bytes) if settings.max_request_kv_bytes else None
            ),
            # An ``auto`` budget stays off until vLLM's pool has been read.
            kv_budget_bytes=0
            if isinstance(settings.kv_budget_bytes, str)
            else int(settings.kv_budget_bytes),
            kv_budget_engines=settings.data_parallel_size,
            downscale=settings.over_budget_action is OverBudgetAction.DOWNSCALE,
            downscale_with_processor_kwargs=(
                settings.downscale_method is DownscaleMethod.PROCESSOR_KWARGS
            ),
        )

    @property
    def kv_budget_bytes_per_engine(self) -> int:
        """The largest request the in-flight budget can ever hold: one engine's share."""
        return self.kv_budget_bytes // max(1, self.kv_budget_engines)


class BudgetsInForce:
    """The budgets now: the operator's, with what vLLM reported applied."""

    __slots__ = ("current",)

    def __init__(self, budgets: Budgets) -> None:
        self.current = budgets
