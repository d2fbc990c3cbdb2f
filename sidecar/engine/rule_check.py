"""The self-check: the native rule against vLLM's own count, on sizes chosen to exercise it.

Run once vLLM answers, and again after every engine restart. Each size is priced by the rule
and through ``/tokenize`` (``sidecar.engine.counts``), one at a time so the check never
loads vLLM's API server with more than one image. The sizes: a tiny image (the processor
enlarges it), one just below ``min_pixels``, one each side of ``max_pixels``, both extreme
aspect ratios, a full-HD frame and a 12 MP phone photo. A rule without a pixel range gets the
fixed ones only.

A disagreement names its likely cause in words: the pixel caps differ from vLLM's (the usual
one: ``--mm-processor-kwargs`` set on vLLM and not on the sidecar), every size off by the
same few tokens (the chat template's wrapper around an image), or a refusal on one side only.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from sidecar.cost.engine_prices import EngineCount
from sidecar.errors import ImageError
from sidecar.vision import VisionRule

Count = Callable[[int, int], Awaitable[EngineCount]]

TINY_SIDE_PX = 32
ASPECT_LONG_SIDE_PX = 2048  # against TINY_SIDE_PX: 64:1, inside every processor's limit
FIXED_SIZES: tuple[tuple[str, int, int], ...] = (
    ("tiny", TINY_SIDE_PX, TINY_SIDE_PX),
    ("wide", ASPECT_LONG_SIDE_PX, TINY_SIDE_PX),
    ("tall", TINY_SIDE_PX, ASPECT_LONG_SIDE_PX),
    ("full HD", 1920, 1080),
    ("phone photo", 4032, 3024),
)


@dataclass(frozen=True, slots=True)
class SizeCheck:
    """One size through the rule and through vLLM."""

    label: str
    width_px: int
    height_px: int
    rule_tokens: int | None  # None: the rule refuses the size (rule_refusal says why)
    rule_refusal: str | None
    engine: EngineCount

    @property
    def agrees(self) -> bool:
        """Both give the same count, or both refuse."""
        return self.rule_tokens == self.engine.prompt_tokens

    def describe(self) -> str:
        """``phone photo 4032x3024: rule 1,230 tokens, vLLM 2,502``."""
        rule = "refuses" if self.rule_tokens is None else f"{self.rule_tokens:,} tokens"
        engine = self.engine
        theirs = "refuses" if engine.prompt_tokens is None else f"{engine.prompt_tokens:,}"
        return f"{self.label} {self.width_px}x{self.height_px}: rule {rule}, vLLM {theirs}"


@dataclass(frozen=True, slots=True)
class RuleCheck:
    """One self-check: every size, when it ran (Unix time) and how long it took."""

    sizes: tuple[SizeCheck, ...]
    checked_at_unix_seconds: float
    seconds: float

    @property
    def mismatches(self) -> tuple[SizeCheck, ...]:
        """The sizes where the rule and vLLM disagree."""
        return tuple(size for size in self.sizes if not size.agrees)

    @property
    def largest_engine_tokens(self) -> int:
        """The costliest image vLLM counted in this check."""
        return max((s.engine.prompt_tokens or 0 for s in self.sizes), default=0)


def check_sizes(rule: VisionRule) -> list[tuple[str, int, int]]:
    """The sizes the check prices: the fixed ones, and each side of the rule's pixel range."""
    sizes = list(FIXED_SIZES)
    factor = int(getattr(rule, "factor", 28) or 28)
    min_pixels, max_pixels = _pixel_range(rule)
    if min_pixels is not None:
        side = math.isqrt(min_pixels) - factor
        if side >= factor:
            sizes.append(("below min_pixels", side, side))
    if max_pixels is not None:
        side = math.isqrt(max_pixels)
        if side > 2 * factor:
            sizes.append(("under max_pixels", side - factor, side - factor))
        sizes.append(("over max_pixels", side + factor, side + factor))
    return sizes


async def run_rule_check(rule: VisionRule, count: Count) -> RuleCheck:
    """Price every check size through ``rule`` and ``count``; raises
    ``EngineCountUnavailable`` when vLLM cannot answer."""
    started, at = time.perf_counter(), time.time()
    checked = []
    for label, width, height in check_sizes(rule):
        try:
            rule_tokens: int | None = rule.image_tokens(width, height).prompt_tokens
            refusal = None
        except ImageError as exc:
            rule_tokens, refusal = None, exc.message
        checked.append(
            SizeCheck(label, width, height, rule_tokens, refusal, await count(width, height))
        )
    return RuleCheck(tuple(checked), at, time.perf_counter() - started)


def likely_cause(check: RuleCheck, size: SizeCheck, rule: VisionRule) -> str:
    """Why ``size`` disagrees, in words an operator can act on."""
    if size.rule_tokens is None:
        return f"the rule refuses the size ({size.rule_refusal}) but vLLM counts it"
    if size.engine.prompt_tokens is None:
        return f"vLLM refuses the size ({size.engine.refusal}) but the rule prices it"
    offsets = {
        s.engine.prompt_tokens - s.rule_tokens
        for s in check.sizes
        if s.engine.prompt_tokens is not None and s.rule_tokens is not None
    }
    difference = size.engine.prompt_tokens - size.rule_tokens
    if len(offsets) == 1:
        return (
            f"every size differs by {difference:+d} tokens: the chat template puts other "
            "tokens around an image than the rule's wrapper (a changed template or model)"
        )
    min_pixels, max_pixels = _pixel_range(rule)
    pixels = size.width_px * size.height_px
    if max_pixels is not None and (pixels >= max_pixels or difference < 0):
        side = "above" if difference > 0 else "below"
        return (
            f"vLLM's max_pixels is {side} the sidecar's ({max_pixels:,}): "
            "SIDECAR_MAX_PIXELS must equal vLLM's --mm-processor-kwargs max_pixels"
        )
    if min_pixels is not None and pixels <= min_pixels:
        return (
            f"vLLM's min_pixels is not the sidecar's ({min_pixels:,}): "
            "SIDECAR_MIN_PIXELS must equal vLLM's --mm-processor-kwargs min_pixels"
        )
    return f"the {rule.family} rule does not follow vLLM's processor for this model"


def _pixel_range(rule: VisionRule) -> tuple[int | None, int | None]:
    low, high = getattr(rule, "min_pixels", None), getattr(rule, "max_pixels", None)
    return (
        low if isinstance(low, int) else None,
        high if isinstance(high, int) else None,
    )
