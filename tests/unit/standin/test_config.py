"""standin.config: the crude token count and the fault header's vocabulary."""

from __future__ import annotations

from typing import Any

import pytest

from sidecar.standin import Fault, crude_prompt_tokens
from sidecar.standin.config import CRUDE_TOKENS_PER_IMAGE


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"messages": [{"role": "user", "content": "abcdefgh"}]}, 2),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "abcd"},
                            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}},
                            {"image_url": "https://example.invalid/cat.png"},
                        ],
                    }
                ]
            },
            1 + 2 * CRUDE_TOKENS_PER_IMAGE,
        ),
        (
            {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
            CRUDE_TOKENS_PER_IMAGE,
        ),
        (
            {"messages": [{"content": [{"type": "image", "source": {"data": "A" * 400}}]}]},
            CRUDE_TOKENS_PER_IMAGE,
        ),
        ({}, 1),
    ],
    ids=["text", "chat-images", "responses-image", "anthropic-image", "empty"],
)
def test_crude_prompt_tokens_counts_text_and_images(body: dict[str, Any], expected: int) -> None:
    assert crude_prompt_tokens(body) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", Fault()),
        ("delay=0.5", Fault(first_byte_delay_seconds=0.5)),
        ("status=503, chunk-delay=0.1", Fault(status=503, chunk_delay_seconds=0.1)),
        ("reset-after=2,malformed", Fault(reset_after_chunks=2, malformed=True)),
        (" hang ", Fault(hang=True)),
        ("close", Fault(close_before_headers=True)),
    ],
    ids=["empty", "delay", "status-and-chunk-delay", "reset-and-malformed", "hang", "close"],
)
def test_fault_parse_reads_the_header_vocabulary(text: str, expected: Fault) -> None:
    assert Fault.parse(text) == expected


@pytest.mark.parametrize(
    "text",
    ["explode", "status=200", "status=abc", "delay=-1", "hang=1", "delay"],
    ids=["unknown", "status-not-error", "status-not-number", "negative", "flag-value", "no-value"],
)
def test_fault_parse_refuses_bad_tokens(text: str) -> None:
    with pytest.raises(ValueError, match=r"fault"):
        Fault.parse(text)
