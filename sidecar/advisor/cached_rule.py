"""A vision rule and a KV geometry that remember their answers: the same arithmetic, worked
out once per question.

A replay asks the same few hundred image sizes millions of times, the downscale plan asks
the same size-and-cap questions for every request that carries them, and KV bytes are asked
for the same token counts again and again.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import fields
from typing import Any, TypeVar

from sidecar.errors import ImageError
from sidecar.profiles.kv_geometry import KvGeometry
from sidecar.vision import ImageTokens, VisionRule

Key = TypeVar("Key", bound=Hashable)
Answer = TypeVar("Answer")


class CachedKv(KvGeometry):
    """``KvGeometry`` whose ``request_kv_bytes`` is memoized."""

    @classmethod
    def of(cls, kv: KvGeometry) -> CachedKv:
        return cls(**{field.name: getattr(kv, field.name) for field in fields(kv) if field.init})

    def request_kv_bytes(self, sequence_tokens: int, cross_attention_tokens: int = 0) -> int:
        memo: dict[tuple[int, int], int] = self.__dict__.setdefault("_memo", {})
        key = (sequence_tokens, cross_attention_tokens)
        answer = memo.get(key)
        if answer is None:
            answer = memo[key] = super().request_kv_bytes(sequence_tokens, cross_attention_tokens)
        return answer


class CachedRule:
    """``rule`` with ``image_tokens`` and ``downscale_size`` memoized (refusals too)."""

    def __init__(self, rule: VisionRule) -> None:
        self._rule = rule
        self._tokens: dict[tuple[int, int], ImageTokens | ImageError] = {}
        self._sizes: dict[
            tuple[int, int, int | None, int | None], tuple[int, int] | ImageError
        ] = {}
        self._max: ImageTokens | None = None

    @property
    def family(self) -> str:
        return self._rule.family

    def image_tokens(self, width_px: int, height_px: int) -> ImageTokens:
        key = (width_px, height_px)
        return _remembered(self._tokens, key, lambda: self._rule.image_tokens(*key))

    def max_image_tokens(self) -> ImageTokens:
        if self._max is None:
            self._max = self._rule.max_image_tokens()
        return self._max

    def downscale_size(
        self, width_px: int, height_px: int, *, max_tokens: int | None, max_pixels: int | None
    ) -> tuple[int, int]:
        return _remembered(
            self._sizes,
            (width_px, height_px, max_tokens, max_pixels),
            lambda: self._rule.downscale_size(
                width_px, height_px, max_tokens=max_tokens, max_pixels=max_pixels
            ),
        )

    def with_pixel_range(self, min_pixels: int | None, max_pixels: int | None) -> CachedRule:
        return CachedRule(self._rule.with_pixel_range(min_pixels, max_pixels))

    def describe(self) -> str:
        return self._rule.describe()

    def __getattr__(self, name: str) -> Any:
        """The rule's own parameters (``max_pixels``, ``min_pixels``) read through."""
        return getattr(self._rule, name)


def _remembered(
    memo: dict[Key, Answer | ImageError], key: Key, work: Callable[[], Answer]
) -> Answer:
    """``work()``'s answer for ``key``, worked out once; a refusal is remembered and raised
    again."""
    answer = memo.get(key)
    if answer is None:
        try:
            answer = work()
        except ImageError as exc:
            answer = exc
        memo[key] = answer
    if isinstance(answer, ImageError):
        raise answer
    return answer
