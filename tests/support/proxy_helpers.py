"""Helpers shared by the end-to-end tests (``tests/e2e``): posting, metrics and log lines, the
expected figures, and what the stand-in was forwarded (bodies are built with ``imaging``).

The expected figures are computed here from first principles (the vision rule, which the
oracle tests pin to the Hugging Face processors, and the KV arithmetic written out again), so a
test that compares them with the sidecar's headers checks the whole pipeline end to end.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
from multidict import CIMultiDictProxy

from sidecar.body.refs import SequenceRef
from sidecar.images.probe import probe_base64, probe_data_uri
from sidecar.profiles import load_profile
from sidecar.serve.keys import LEDGER, METRICS
from sidecar.serve.server import RunningSidecar
from sidecar.standin import FAULT_HEADER
from sidecar.text.text_estimate import estimate_sequence_tokens, overhead_for
from sidecar.vision import VisionRule
from tests.support.imaging import PROMPT
from tests.support.sidecars import QWEN

PROFILE = load_profile(QWEN)
RULE = PROFILE.vision
BYTES_PER_TOKEN = 2 * 28 * 4 * 128 * 2  # K and V x layers x KV heads x head_dim x bf16
QWEN_WRAPPER_TOKENS = 2
DEFAULT_OUTPUT_TOKENS = 1024
CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
RESPONSES = "/v1/responses"
MESSAGES = "/v1/messages"
DECISION = "x-vlm-sidecar-decision"
VISUAL = "x-vlm-sidecar-visual-tokens"
PROMPT_TOKENS = "x-vlm-sidecar-prompt-tokens"
KV = "x-vlm-sidecar-kv-bytes"


@dataclass(frozen=True)
class Reply:
    """One answer as the client saw it."""

    status: int
    headers: CIMultiDictProxy[str]
    body: bytes

    def json(self) -> Any:
        return orjson.loads(self.body)

    @property
    def prediction(self) -> tuple[int, int, int]:
        """(visual tokens, prompt tokens, KV bytes) from the ``x-vlm-sidecar-*`` headers."""
        return (
            int(self.headers[VISUAL]),
            int(self.headers[PROMPT_TOKENS]),
            int(self.headers[KV]),
        )


def url_of(sidecar: RunningSidecar, path: str = CHAT) -> str:
    return f"http://127.0.0.1:{sidecar.port}{path}"


async def post_json(
    session: aiohttp.ClientSession,
    url: str,
    body: dict[str, Any] | bytes,
    headers: dict[str, str] | None = None,
) -> Reply:
    """POST a JSON body (a dict, or bytes sent as they are) to ``url``; the whole answer."""
    raw = body if isinstance(body, bytes) else orjson.dumps(body)
    all_headers = {"Content-Type": "application/json", **(headers or {})}
    async with session.post(url, data=raw, headers=all_headers) as response:
        return Reply(response.status, response.headers, await response.read())


async def post(
    session: aiohttp.ClientSession,
    sidecar: RunningSidecar,
    body: dict[str, Any] | bytes,
    path: str = CHAT,
    headers: dict[str, str] | None = None,
) -> Reply:
    """POST JSON to the sidecar's ``path`` and read the whole answer."""
    return await post_json(session, url_of(sidecar, path), body, headers)


def fault(value: str) -> dict[str, str]:
    """Request headers asking the stand-in for a fault (``x-standin-fault``), as JSON."""
    return {"Content-Type": "application/json", FAULT_HEADER: value}


def ledger_is_idle(sidecar: RunningSidecar) -> bool:
    ledger = sidecar.app[LEDGER]
    return ledger.inflight_bytes == 0 and ledger.inflight_requests == 0 and ledger.queue_depth == 0


def finished(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``request.finished`` lines among captured log events: one per request."""
    return [entry for entry in logs if entry["event"] == "request.finished"]


def _metric_labels(sidecar: RunningSidecar, labels: dict[str, str]) -> dict[str, str]:
    return {"model": sidecar.app[METRICS].model, **labels}


def sample(sidecar: RunningSidecar, name: str, **labels: str) -> float:
    """A metric's value on the sidecar's own registry (0 when the series does not exist)."""
    return sidecar.registry.get_sample_value(name, _metric_labels(sidecar, labels)) or 0.0


def existing_sample(sidecar: RunningSidecar, name: str, **labels: str) -> float:
    """A metric's value on the sidecar's own registry; fails when the series does not exist."""
    value = sidecar.registry.get_sample_value(name, _metric_labels(sidecar, labels))
    assert value is not None, f"{name}{labels} does not exist"
    return value


# --- expected figures ---------------------------------------------------------------------------


def kv_bytes(
    sequence_tokens: int, *, bytes_per_token: int = BYTES_PER_TOKEN, block_size: int = 16
) -> int:
    """Whole blocks of KV for a sequence: the arithmetic of vLLM's paged allocator."""
    return math.ceil(sequence_tokens / block_size) * block_size * bytes_per_token


def text_tokens(
    text: str | Sequence[str], chars_per_token: float = 3.0, *, messages: int = 1
) -> int:
    """The sidecar's estimate for ``text`` in a chat of ``messages`` messages with Qwen2.5-VL's
    built-in template framing; a completions prompt (``messages=0``) has no template."""
    texts = [text] if isinstance(text, str) else list(text)
    sequence = SequenceRef.of_text("".join(texts), messages=messages)
    return estimate_sequence_tokens(
        sequence, chars_per_token, overhead_for(PROFILE.architecture.prompt_family)
    )


def expected(
    sizes: Sequence[tuple[int, int]] = (),
    *,
    text: str | Sequence[str] = PROMPT,
    messages: int = 1,
    output_tokens: int = DEFAULT_OUTPUT_TOKENS,
    n: int = 1,
    media_tokens: int = 0,
    image_tokens: Sequence[int] | None = None,
    rule: VisionRule = RULE,
    chars_per_token: float = 3.0,
    bytes_per_token: int = BYTES_PER_TOKEN,
    block_size: int = 16,
    template: bool = True,
) -> tuple[int, int, int]:
    """(visual tokens, prompt tokens, KV bytes) for a request with images of ``sizes``."""
    tokens = (
        list(image_tokens)
        if image_tokens is not None
        else [rule.image_tokens(w, h).tokens for w, h in sizes]
    )
    visual = sum(tokens) + media_tokens
    text_count = text_tokens(text, chars_per_token, messages=messages if template else 0)
    prompt = visual + QWEN_WRAPPER_TOKENS * len(tokens) + text_count
    sequence = prompt + n * output_tokens
    return (
        visual,
        prompt,
        kv_bytes(sequence, bytes_per_token=bytes_per_token, block_size=block_size),
    )


# --- what was forwarded ------------------------------------------------------------------------


def image_uris_in(node: Any) -> list[str]:
    """Every data URI or bare base64 image value in a parsed body, in document order."""
    found: list[str] = []
    if isinstance(node, dict):
        source = node.get("source")
        if node.get("type") == "image" and isinstance(source, dict) and "data" in source:
            found.append(source["data"])
        for value in node.values():
            found += image_uris_in(value)
    elif isinstance(node, list):
        for value in node:
            found += image_uris_in(value)
    elif isinstance(node, str) and node.startswith("data:image/"):
        found.append(node)
    return found


def reprobe(uri_or_base64: str) -> tuple[int, int, str]:
    """(width, height, format) of an image as vLLM will see it."""
    if uri_or_base64.startswith("data:"):
        header = probe_data_uri(uri_or_base64)
    else:
        header = probe_base64(uri_or_base64)
    return header.width_px, header.height_px, header.format


def mask_images(node: Any) -> Any:
    """A parsed body with every inline image value replaced by ``"<image>"``."""
    if isinstance(node, dict):
        masked = {key: mask_images(value) for key, value in node.items()}
        source = node.get("source")
        if node.get("type") == "image" and isinstance(source, dict) and "data" in source:
            masked["source"] = {**source, "data": "<image>"}
        return masked
    if isinstance(node, list):
        return [mask_images(value) for value in node]
    if isinstance(node, str) and node.startswith("data:image/"):
        return "<image>"
    return node
