"""The sidecar's predicted prompt tokens equal vLLM 0.33's rendered token count, exactly.

Each case of ``corpus`` goes to vLLM's ``/render`` twin of its route and through the
sidecar's real pricer (the model directory's tokenizer and template, images probed as in
production); both counts include the images' expanded placeholders. Both models share
Qwen2's real tokenizer (Qwen3-VL with its four extra added tokens) and use their real
templates: Qwen2.5-VL's loops over ``message['content']``, Qwen3-VL's over a macro parameter.
"""

from __future__ import annotations

import functools
import json

import pytest

from sidecar.body.request_body import parse_request_body
from sidecar.errors import InvalidRequestError
from sidecar.routes import Route
from tests.renderer.conftest import Renderers
from tests.renderer.corpus import CHAT, Case, corpus
from tests.renderer.harness import rendered_tokens
from tests.support.qwen_models import MODELS

pytestmark = pytest.mark.timeout(300)
NAMES = [case.name for case in corpus("model", lambda w, h: "http://unused")]


@functools.cache
def _cases(model: str, image_base_url: str) -> dict[str, Case]:
    def url(width: int, height: int) -> str:
        return f"{image_base_url}/{width}x{height}.png"

    return {case.name: case for case in corpus(model, url)}


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("model", list(MODELS))
async def test_predicted_prompt_tokens_equal_vllm(
    renderers: Renderers, model: str, name: str
) -> None:
    case = _cases(model, renderers.image_base_url)[name]
    truth = rendered_tokens(renderers.servers[model], case.route, case.body)
    assert isinstance(truth, int), f"vLLM refused the case: {truth}"
    predicted = await renderers.sidecars[model].predict(case.route, case.body)
    assert predicted.exact, "the sidecar fell back to the estimate"
    assert predicted.prompt_tokens == truth


@pytest.mark.parametrize(
    "part",
    [
        {"type": "input_image", "image_url": "https://example.com/a.png"},
        {"type": "input_image", "image_url": "https://example.com/a.png", "extra": 1},
        {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "big"},
    ],
    ids=["no-detail", "no-detail-extra-key", "bad-detail"],
)
async def test_chat_input_image_without_detail_is_refused_with_vllms_message(
    renderers: Renderers, part: dict[str, object]
) -> None:
    body = {"model": "qwen2.5-vl-7b", "messages": [{"role": "user", "content": [part]}]}
    status, payload = renderers.servers["qwen2.5-vl-7b"].render(CHAT, body)
    assert status == 400
    with pytest.raises(InvalidRequestError) as refused:
        parse_request_body(json.dumps(body).encode(), Route.CHAT)
    assert refused.value.message == payload["error"]["message"]
