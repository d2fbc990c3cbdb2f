"""What one image of a size costs, in vLLM's own words: ``POST /tokenize``.

``/tokenize`` is always registered. With chat ``messages`` holding an image it runs the whole
multimodal processor (with ``skip_mm_cache``, so the engine's own cache is left alone) and
answers ``{count, max_model_len, tokens}`` without generating. The image's cost is the count
with the image minus the count without it, the chat template's tokens around it included.
The image is a synthetic one-colour PNG of the size (``sidecar.images.synthetic``): pixel
content never changes a count.

A 400 for the image, when the same chat without it is accepted, is vLLM refusing the size
(aspect ratio, pixel limit): an answer, memoised with vLLM's message. Anything else (down,
a timeout, a 5xx, no ``/tokenize``) is ``EngineCountUnavailable``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import orjson

from sidecar.cost.engine_prices import EngineCount, EngineCountUnavailable
from sidecar.images.synthetic import solid_png_data_uri

PROMPT_TEXT = "Describe the image."
# On every call, so that vLLM's access log and a stand-in tell them from forwarded traffic.
CALIBRATION_HEADER = "X-Vlm-Sidecar-Calibration"


class TokenizeCounter:
    """Counts through one vLLM's ``/tokenize``; ``forget`` after the engine restarts."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        base_url: str,
        *,
        timeout_seconds: float,
        model: str | None = None,
    ) -> None:
        self._session = session
        self._base_url = base_url.rstrip("/")
        self._timeout = aiohttp.ClientTimeout(total=timeout_seconds)
        self.model = model
        self._baseline: int | None = None

    def forget(self) -> None:
        """Count the chat without an image again next time (a new engine, a new template)."""
        self._baseline = None

    async def baseline_tokens(self) -> int:
        """The chat's tokens without the image."""
        if self._baseline is None:
            status, document = await self._tokenize([{"type": "text", "text": PROMPT_TEXT}])
            if status != 200:
                raise EngineCountUnavailable(
                    f"vLLM's /tokenize answered {status} for a text-only chat: {_message(document)}"
                )
            self._baseline = _count(document)
        return self._baseline

    async def count(
        self,
        width_px: int,
        height_px: int,
        min_pixels: int | None = None,
        max_pixels: int | None = None,
    ) -> EngineCount:
        """The prompt positions one ``width_px`` x ``height_px`` image adds, or vLLM's refusal."""
        baseline = await self.baseline_tokens()
        uri = await asyncio.to_thread(solid_png_data_uri, width_px, height_px)
        kwargs = {
            name: value
            for name, value in (("min_pixels", min_pixels), ("max_pixels", max_pixels))
            if value is not None
        }
        content: list[dict[str, Any]] = [
            {"type": "image_url", "image_url": {"url": uri}},
            {"type": "text", "text": PROMPT_TEXT},
        ]
        status, document = await self._tokenize(content, kwargs or None)
        if status == 200:
            return EngineCount(prompt_tokens=_count(document) - baseline)
        if status == 400:
            return EngineCount(prompt_tokens=None, refusal=_message(document))
        raise EngineCountUnavailable(f"vLLM's /tokenize answered {status}: {_message(document)}")

    async def _tokenize(
        self, content: list[dict[str, Any]], mm_processor_kwargs: dict[str, int] | None = None
    ) -> tuple[int, Any]:
        body: dict[str, Any] = {
            "messages": [{"role": "user", "content": content}],
            "add_generation_prompt": True,
        }
        if self.model is not None:
            body["model"] = self.model
        if mm_processor_kwargs is not None:
            body["mm_processor_kwargs"] = mm_processor_kwargs
        try:
            async with self._session.post(
                f"{self._base_url}/tokenize",
                data=orjson.dumps(body),
                headers={"Content-Type": "application/json", CALIBRATION_HEADER: "1"},
                timeout=self._timeout,
            ) as response:
                raw = await response.read()
                status = response.status
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise EngineCountUnavailable(f"vLLM's /tokenize: {type(exc).__name__}: {exc}") from None
        try:
            document = orjson.loads(raw)
        except orjson.JSONDecodeError:
            document = raw[:200].decode("utf-8", "replace")
        return status, document


def _count(document: Any) -> int:
    count = document.get("count") if isinstance(document, dict) else None
    if not isinstance(count, int):
        raise EngineCountUnavailable("vLLM's /tokenize answer has no count")
    return count


def _message(document: Any) -> str:
    """vLLM's error message: ``{"error": {"message": ...}}`` (0.33) or ``{"message": ...}``."""
    if isinstance(document, dict):
        error = document.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
        if isinstance(document.get("message"), str):
            return str(document["message"])
    return str(document)[:200]
