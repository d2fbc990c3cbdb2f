"""A stand-in vLLM whose ``/tokenize`` counts images as a given rule does: an engine whose
processor is configured (or not) as the sidecar believes, for the ask-the-engine tests."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from sidecar.errors import ImageError
from sidecar.images.probe import probe_base64
from sidecar.standin.config import TokenFn, crude_image_tokens, crude_prompt_tokens
from sidecar.standin.replies import StandinRequestError
from sidecar.vision import VisionRule


def image_uris(node: Any) -> Iterator[str]:
    """Every ``image_url.url`` data URI of a chat body."""
    if isinstance(node, dict):
        image = node.get("image_url")
        if isinstance(image, dict) and str(image.get("url", "")).startswith("data:"):
            yield image["url"]
        for child in node.values():
            yield from image_uris(child)
    elif isinstance(node, list):
        for child in node:
            yield from image_uris(child)


def counting_images_by(rule: VisionRule) -> TokenFn:
    """A ``prompt_tokens_fn``: the stand-in's crude text count plus ``rule``'s prompt tokens
    for each inline image, refusing (400) what the rule refuses, as vLLM's processor would."""

    def count(body: Mapping[str, Any]) -> int:
        tokens = crude_prompt_tokens(body) - crude_image_tokens(body)
        for uri in image_uris(body):
            payload = uri.partition(",")[2].encode()
            header = probe_base64(payload, max_image_pixels=10**9)
            try:
                tokens += rule.image_tokens(header.width_px, header.height_px).prompt_tokens
            except ImageError as exc:
                raise StandinRequestError(400, exc.message) from None
        return tokens

    return count
