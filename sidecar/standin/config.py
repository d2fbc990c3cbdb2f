"""What the stand-in pretends to be: its settings, its fault vocabulary, its token counts.

Pure and synchronous.  ``StandinConfig`` is frozen; the server swaps in changed copies at run time.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

TokenFn = Callable[[Mapping[str, Any]], int]
"""Reads a parsed request body and returns a token count."""

CRUDE_TOKENS_PER_IMAGE = 256
_TEXT_KEYS = frozenset({"text", "content", "prompt", "input", "system", "instructions"})
_IMAGE_PART_TYPES = frozenset({"image_url", "input_image", "image"})


def _walk(node: object, key: str | None = None) -> Iterator[tuple[str | None, object]]:
    yield key, node
    if isinstance(node, Mapping):
        for child_key, child in node.items():
            yield from _walk(child, str(child_key))
    elif isinstance(node, list):
        for child in node:
            yield from _walk(child, key)


def count_images(body: Mapping[str, Any]) -> int:
    """Count image parts in any of the four body shapes (typed or type-less)."""
    return sum(
        1
        for _, node in _walk(body)
        if isinstance(node, Mapping)
        and (
            (isinstance(node.get("type"), str) and node["type"] in _IMAGE_PART_TYPES)
            or ("type" not in node and "image_url" in node)
        )
    )


def crude_image_tokens(body: Mapping[str, Any]) -> int:
    """A flat guess of image tokens: ``CRUDE_TOKENS_PER_IMAGE`` for every image part."""
    return CRUDE_TOKENS_PER_IMAGE * count_images(body)


def crude_prompt_tokens(body: Mapping[str, Any]) -> int:
    """A crude prompt length: text characters // 4 plus the crude image tokens, at least 1."""
    chars = sum(
        len(node) for key, node in _walk(body) if key in _TEXT_KEYS and isinstance(node, str)
    )
    return max(1, chars // 4 + crude_image_tokens(body))


@dataclass(frozen=True, kw_only=True)
class Fault:
    """One way to misbehave; ``Fault()`` behaves well.  See the package docstring."""

    first_byte_delay_seconds: float = 0.0
    chunk_delay_seconds: float | None = None
    status: int | None = None
    hang: bool = False
    reset_after_chunks: int | None = None
    malformed: bool = False
    close_before_headers: bool = False

    @classmethod
    def parse(cls, text: str) -> Fault:
        """Parse ``x-standin-fault`` text such as ``"delay=0.5, status=503"``.

        Raises ``ValueError`` on an unknown token or an out-of-range value.
        """
        changes: dict[str, Any] = {}
        for token in filter(None, (part.strip() for part in text.split(","))):
            name, sep, raw = (piece.strip() for piece in token.partition("="))
            if not sep and name in _FLAGS:
                changes[_FLAGS[name]] = True
            elif sep and name in _VALUES:
                attribute, kind = _VALUES[name]
                try:
                    value = kind(raw)
                except ValueError:
                    raise ValueError(f"fault {token!r} needs a number") from None
                if value < 0:
                    raise ValueError(f"fault {token!r} must not be negative")
                changes[attribute] = value
            else:
                raise ValueError(f"unknown fault {token!r}; known: {', '.join(FAULT_NAMES)}")
        fault = dataclasses.replace(cls(), **changes)
        if fault.status is not None and not 400 <= fault.status <= 599:
            raise ValueError(f"fault status must be 400-599, not {fault.status}")
        return fault


_FLAGS = {"hang": "hang", "malformed": "malformed", "close": "close_before_headers"}
_VALUES: dict[str, tuple[str, Callable[[str], float]]] = {
    "delay": ("first_byte_delay_seconds", float),
    "chunk-delay": ("chunk_delay_seconds", float),
    "status": ("status", int),
    "reset-after": ("reset_after_chunks", int),
}
FAULT_NAMES = (*_VALUES, *_FLAGS)


@dataclass(frozen=True, kw_only=True)
class StandinConfig:
    """Everything the stand-in pretends to be; every field can change while it runs."""

    served_model_name: str = "Qwen/Qwen2.5-VL-7B-Instruct"
    max_model_len: int = 32768
    completion_tokens: int = 8
    """Tokens generated when ``max_tokens`` and the context leave room for them."""
    prompt_tokens_fn: TokenFn = crude_prompt_tokens
    image_tokens_fn: TokenFn = crude_image_tokens
    enable_prompt_tokens_details: bool = False
    """Like vLLM's ``--enable-prompt-tokens-details``: adds ``usage.prompt_tokens_details``."""
    chunk_delay_seconds: float = 0.0
    fault: Fault = field(default_factory=Fault)
    """Applied to every inference request without an ``x-standin-fault`` header."""
    healthy: bool = True
    record_requests: bool = True
    block_size: int = 16
    num_gpu_blocks: int = 8192
    cache_dtype: str = "auto"
    gpu_memory_utilization: float = 0.92
    enable_prefix_caching: bool = True
    kv_cache_usage_perc: float = 0.0
    num_requests_waiting: int = 0
    num_requests_running: int = 0
    """Added to the requests the stand-in is actually serving."""
    data_parallel_size: int = 1
    """Engines behind the one frontend, as vLLM's ``--data-parallel-size``: ``num_gpu_blocks``
    is each engine's pool; ``/metrics`` reports one series per engine, with the pools summed
    in ``vllm:cache_config_info`` as vLLM's frontend sums them.  The load gauges above are
    engine 0's; the other engines report the same KV usage and nothing waiting or running."""
    model_aliases: tuple[str, ...] = ()
    """More names the model is served under (vLLM's ``--served-model-name a b``); a request
    naming any other model gets vLLM's 404 (``param: "model"``)."""
    max_images_per_prompt: int | None = None
    """vLLM's ``--limit-mm-per-prompt`` image count (vLLM's own default is 999); more images
    get its 400 (``param: "image"``).  None: no limit."""
    trust_request_mm_kwargs: bool = False
    """vLLM's ``--trust-request-mm-kwargs``: without it a request's ``mm_processor_kwargs`` get
    a 400."""
    load_images: bool = True
    """Decode inline images as vLLM does (strict base64, every pixel): a broken one gets its
    400.  Remote URLs are never fetched."""
    version: str = "0.32.0"
    """What ``/version`` says, and the middle of ``system_fingerprint``."""

    @property
    def system_fingerprint(self) -> str:
        """``vllm-<version>-<8 hex>``, as vLLM stamps answers (fixed per configuration)."""
        digest = hashlib.sha256(f"{self.served_model_name}:{self.version}".encode()).hexdigest()
        return f"vllm-{self.version}-{digest[:8]}"
