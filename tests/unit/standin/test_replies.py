"""standin.replies: how much the stand-in answers, clamped like vLLM."""

from __future__ import annotations

import pytest

from sidecar.standin import StandinConfig
from sidecar.standin.replies import StandinRequestError, plan_completion
from tests.support.proxy_helpers import CHAT


@pytest.mark.parametrize(
    ("limits", "prompt_tokens", "expected_tokens", "finish_reason"),
    [
        ({}, 100, 6, "stop"),
        ({"max_tokens": 3}, 100, 3, "length"),
        ({"max_completion_tokens": 2, "max_tokens": 5}, 100, 2, "length"),
        ({"max_output_tokens": 20}, 100, 6, "stop"),
        ({"max_tokens": 50}, 4094, 2, "length"),
    ],
    ids=["configured", "max-tokens", "max-completion-tokens-first", "limit-above", "context"],
)
def test_plan_completion_clamps_completion_tokens_like_vllm(
    limits: dict[str, int], prompt_tokens: int, expected_tokens: int, finish_reason: str
) -> None:
    config = StandinConfig(
        prompt_tokens_fn=lambda body: prompt_tokens, completion_tokens=6, max_model_len=4096
    )
    completion = plan_completion(config, CHAT, limits)
    assert completion.completion_tokens == expected_tokens
    assert completion.finish_reason == finish_reason


def test_plan_completion_refuses_text_longer_than_max_model_len_while_tokenizing() -> None:
    config = StandinConfig(prompt_tokens_fn=lambda body: 5000, max_model_len=4096)
    with pytest.raises(StandinRequestError, match=r"at least 4097 input tokens") as caught:
        plan_completion(config, CHAT, {})
    assert caught.value.param == "input_tokens"


def test_plan_completion_refuses_images_that_push_the_prompt_over_max_model_len() -> None:
    config = StandinConfig(
        prompt_tokens_fn=lambda body: 5000, image_tokens_fn=lambda body: 1000, max_model_len=4096
    )
    image = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
    body = {"messages": [{"role": "user", "content": [image]}]}
    with pytest.raises(StandinRequestError, match=r"Input length \(5000\) exceeds .* \(4096\)"):
        plan_completion(config, CHAT, body)


def test_plan_completion_refuses_max_tokens_beyond_the_context() -> None:
    config = StandinConfig(max_model_len=4096)
    with pytest.raises(StandinRequestError, match=r"max_tokens=5000 cannot be greater") as caught:
        plan_completion(config, CHAT, {"max_tokens": 5000})
    assert caught.value.param == "max_tokens"
