"""The stand-in tests' own stand-in: fixed token counts, one small body per route (naming
the model the stand-in serves: vLLM answers 404 to any other)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sidecar.standin import StandinConfig
from tests.support.proxy_helpers import CHAT, COMPLETIONS, MESSAGES, RESPONSES
from tests.support.sidecars import QWEN

PROMPT_TOKENS = 321
IMAGE_TOKENS = 64
BODIES: dict[str, dict[str, Any]] = {
    CHAT: {"model": QWEN, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4},
    COMPLETIONS: {"model": QWEN, "prompt": "hi", "max_tokens": 4},
    RESPONSES: {"model": QWEN, "input": "hi", "max_output_tokens": 4},
    MESSAGES: {"model": QWEN, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4},
}
STREAM_WITH_USAGE = {"stream": True, "stream_options": {"include_usage": True}}


def fixed_prompt_tokens(body: Mapping[str, Any]) -> int:
    return PROMPT_TOKENS


def fixed_image_tokens(body: Mapping[str, Any]) -> int:
    return IMAGE_TOKENS


CONFIG = StandinConfig(
    prompt_tokens_fn=fixed_prompt_tokens,
    image_tokens_fn=fixed_image_tokens,
    completion_tokens=6,
    max_model_len=4096,
)
