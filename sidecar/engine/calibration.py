"""Ask the engine, as the serving shell runs it: the self-check and engine-calibrated pricing.

``EngineCalibration`` is built once per sidecar. It owns the memo of vLLM's counts
(``EnginePrices``, which the pricer reads) and decides, from the settings and the last
self-check, whether images are priced through vLLM now:

- ``SIDECAR_PRICING=engine``: always; ``rule``: never; ``auto``: when the family has no native
  rule (``EngineOnlyRule``), or when a self-check failed under ``SIDECAR_RULE_MISMATCH=engine``.
- ``SIDECAR_RULE_MISMATCH=refuse``: not ready until a self-check has passed (enforce mode;
  shadow never breaks traffic).

The engine watcher calls ``engine_connected`` when vLLM answers for the first time and after
every time it stopped answering (a restart): the self-check runs again, and after a restart
the memo is dropped, since the new engine may be configured otherwise (a memo kept on disk
is read at start-up and kept for the first engine). A check that could not finish (vLLM has
no ``/tokenize``, a timeout) is retried on a later poll.

Before a size's count is known the pricer waits for it (within the bounds); when it cannot be
had, the image is priced at ``upper_bound``: the rule's largest image while the rule agrees
with vLLM, else the context length, which no image vLLM accepts can exceed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import structlog

from sidecar.cost.engine_prices import EngineCount, EngineCountUnavailable, EnginePrices, ShapeKey
from sidecar.engine.counts import TokenizeCounter
from sidecar.engine.rule_check import RuleCheck, likely_cause, run_rule_check
from sidecar.errors import ConfigurationError
from sidecar.profiles import ModelProfile
from sidecar.settings import Mode, Pricing, RuleMismatch, Settings
from sidecar.vision import ImageTokens, family_rule
from sidecar.vision.engine_only import EngineOnlyRule

CHECK_RETRY_SECONDS = 30.0
MEMO_FORMAT = 1


class EngineCalibration:
    """The self-check's state and the memo of vLLM's counts, for one sidecar."""

    def __init__(
        self,
        settings: Settings,
        profile: ModelProfile,
        *,
        model: str,
        logger: structlog.typing.FilteringBoundLogger,
        context_tokens: Callable[[], int],
    ) -> None:
        if settings.pricing is Pricing.RULE and settings.rule_mismatch is RuleMismatch.ENGINE:
            raise ConfigurationError(
                "SIDECAR_RULE_MISMATCH=engine needs SIDECAR_PRICING=auto or engine, not rule"
            )
        self._settings = settings
        self._profile = profile
        self._model = model
        self._logger = logger
        self._context_tokens = context_tokens
        self.engine_only = isinstance(family_rule(profile.vision), EngineOnlyRule)
        if self.engine_only and settings.pricing is Pricing.RULE:
            raise ConfigurationError(
                f"model {profile.name!r} has no native rule; SIDECAR_PRICING=rule cannot price it"
            )
        self.prices = EnginePrices(
            self._ask,
            upper_bound=profile.vision.max_image_tokens(),
            memo_entries=settings.engine_memo_entries,
            concurrency=settings.engine_calibration_concurrency,
            calls_per_second=settings.engine_calibrations_per_second,
            timeout_seconds=settings.engine_calibration_timeout_seconds,
            wait_for_answers=settings.mode is not Mode.SHADOW,  # shadow never delays traffic
        )
        self.last_check: RuleCheck | None = None
        self.check_error: str | None = None
        self._checked_ok_since_connect = False
        self._counter: TokenizeCounter | None = None
        self._task: asyncio.Task[RuleCheck | None] | None = None
        self._retry_at = 0.0
        self.connections = 0  # times vLLM came up: 1 at start-up, one more per restart
        self._apply()

    # --- what the rest of the sidecar reads ------------------------------------------

    @property
    def mismatches(self) -> int:
        """Sizes that disagreed at the last self-check; 0 when all agreed or none ran."""
        return 0 if self.last_check is None else len(self.last_check.mismatches)

    @property
    def holds_readiness(self) -> str | None:
        """Why the sidecar must not be ready (``SIDECAR_RULE_MISMATCH=refuse``), or None."""
        settings = self._settings
        if settings.rule_mismatch is not RuleMismatch.REFUSE or settings.mode is Mode.SHADOW:
            return None
        if self.engine_only or settings.engine_poll_seconds <= 0:
            return None  # nothing to check against, or no poll to run the check
        if self.mismatches:
            return f"the rule disagrees with vLLM on {self.mismatches} sizes (rule check)"
        if not self._checked_ok_since_connect:
            return self.check_error or "the rule check has not run yet"
        return None

    # --- the engine's lifecycle ----------------------------------------------------

    def attach(self, session: aiohttp.ClientSession, base_url: str) -> None:
        """Talk to vLLM through ``session`` (the upstream one, opened at start-up)."""
        self._counter = TokenizeCounter(
            session,
            base_url,
            timeout_seconds=self._settings.engine_calibration_timeout_seconds,
        )

    def engine_connected(self) -> None:
        """vLLM answers, for the first time or after it stopped: check again from scratch."""
        if self._counter is not None:
            self._counter.forget()
        if self.connections:
            self.prices.forget()  # a restarted engine may count otherwise
        self.connections += 1
        self._checked_ok_since_connect = False
        self._retry_at = 0.0
        self._start_check()

    def engine_polled(self) -> None:
        """A later poll: retry a check that could not finish."""
        if self.check_error is not None and time.monotonic() >= self._retry_at:
            self._start_check()

    async def close(self) -> None:
        """Stop a check in progress and calibrations, and keep the memo if asked to."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.prices.close()
        self.save_memo()

    # --- the self-check ---------------------------------------------------------------

    def _start_check(self) -> None:
        if self._counter is None or self.engine_only:
            return
        if self._task is not None and not self._task.done():
            return
        self._task = asyncio.create_task(self.check(), name="rule-check")

    async def check(self) -> RuleCheck | None:
        """Run the self-check now; None when vLLM could not answer it."""
        counter = self._counter
        if counter is None:
            return None
        rule = self._profile.vision

        async def count(width_px: int, height_px: int) -> EngineCount:
            return await counter.count(width_px, height_px)

        try:
            check = await run_rule_check(rule, count)
        except EngineCountUnavailable as exc:
            self.check_error = f"the rule check could not ask vLLM: {exc}"
            self._retry_at = time.monotonic() + CHECK_RETRY_SECONDS
            self._logger.warning("rule_check.unavailable", error=str(exc))
            return None
        self.check_error = None
        self.last_check = check
        self._checked_ok_since_connect = not check.mismatches
        self.prices.remember(((s.width_px, s.height_px, None, None), s.engine) for s in check.sizes)
        for size in check.mismatches:
            self._logger.warning(
                "rule_check.mismatch",
                size=f"{size.width_px}x{size.height_px}",
                case=size.label,
                rule_prompt_tokens=size.rule_tokens,
                engine_prompt_tokens=size.engine.prompt_tokens,
                engine_refusal=size.engine.refusal,
                likely_cause=likely_cause(check, size, rule),
                action=self._settings.rule_mismatch.value,
            )
        self._logger.info(
            "rule_check.done",
            sizes=len(check.sizes),
            mismatches=len(check.mismatches),
            seconds=round(check.seconds, 3),
        )
        self._apply()
        return check

    def _apply(self) -> None:
        """Whether images are priced through vLLM now, and at what bound before a count."""
        settings, prices = self._settings, self.prices
        switched = settings.rule_mismatch is RuleMismatch.ENGINE and self.mismatches > 0
        prices.active = (
            settings.pricing is Pricing.ENGINE
            or self.engine_only
            or (settings.pricing is Pricing.AUTO and switched)
        )
        trusted = not self.engine_only and self.mismatches == 0
        prices.upper_bound = (
            self._profile.vision.max_image_tokens()
            if trusted
            else ImageTokens(tokens=self._context_tokens(), wrapper_tokens=0)
        )

    def refresh_bound(self) -> None:
        """The context length may have been read from vLLM since: recompute the bound."""
        self._apply()

    # --- asking and the memo on disk -------------------------------------------------

    async def _ask(
        self, width_px: int, height_px: int, min_pixels: int | None, max_pixels: int | None
    ) -> EngineCount:
        if self._counter is None:
            raise EngineCountUnavailable("the sidecar is not connected to vLLM yet")
        return await self._counter.count(width_px, height_px, min_pixels, max_pixels)

    def load_memo(self) -> int:
        """vLLM's counts kept by an earlier run of this model; how many were read."""
        path = self._settings.engine_memo_path
        if path is None or not Path(path).is_file():
            return 0
        try:
            document = json.loads(Path(path).read_text(encoding="utf-8"))
            if document.get("format") != MEMO_FORMAT or document.get("model") != self._memo_id():
                self._logger.info("engine_memo.ignored", path=path, reason="another model or setup")
                return 0
            entries = [_entry(row) for row in document["entries"]]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            self._logger.warning("engine_memo.unreadable", path=path, error=str(exc))
            return 0
        self.prices.remember(entries)
        return len(entries)

    def save_memo(self) -> None:
        """Write the memo where ``SIDECAR_ENGINE_MEMO_PATH`` says, atomically."""
        path = self._settings.engine_memo_path
        if path is None:
            return
        rows = [[*key, count.prompt_tokens, count.refusal] for key, count in self.prices.entries()]
        document = {"format": MEMO_FORMAT, "model": self._memo_id(), "entries": rows}
        temporary = f"{path}.tmp"
        try:
            Path(temporary).write_text(json.dumps(document), encoding="utf-8")
            os.replace(temporary, path)
        except OSError as exc:
            self._logger.warning("engine_memo.unwritable", path=path, error=str(exc))

    def _memo_id(self) -> str:
        """What the counts depend on: the model and the sidecar's copy of vLLM's pixel flags."""
        settings = self._settings
        return f"{self._model}|{settings.min_pixels}|{settings.max_pixels}"


def _entry(row: Any) -> tuple[ShapeKey, EngineCount]:
    width, height, low, high, tokens, refusal = row
    key: ShapeKey = (int(width), int(height), low, high)
    return key, EngineCount(prompt_tokens=tokens, refusal=refusal)
