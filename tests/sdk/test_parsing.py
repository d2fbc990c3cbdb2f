"""The official SDKs parse every answer the sidecar relays from the stand-in vLLM.

The async clients, so the SDK shares the event loop that runs the sidecar and the stand-in:
``client.chat.completions.create`` (JSON and stream), ``client.responses.create`` and
``client.responses.stream()``, Anthropic's ``messages.create`` and ``messages.stream()``. Each
answer must parse into the SDK's types with the fields a caller reads (text, finish, usage),
and the usage the SDK reports must be the stand-in's count.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anthropic
import openai
import orjson
import pytest

from sidecar.serve.server import RunningSidecar
from sidecar.standin import StandinServer
from tests.support.imaging import jpeg_uri
from tests.support.sidecars import QWEN, SidecarFactory

IMAGE = jpeg_uri(640, 480)
MAX_TOKENS = 4  # the stand-in generates up to 8; this cuts it: finish "length"


@pytest.fixture
async def sidecar(make_sidecar: SidecarFactory) -> RunningSidecar:
    return await make_sidecar(engine_poll_seconds=0)


@pytest.fixture
async def openai_client(sidecar: RunningSidecar) -> AsyncIterator[openai.AsyncOpenAI]:
    base_url = f"http://127.0.0.1:{sidecar.port}/v1"
    async with openai.AsyncOpenAI(base_url=base_url, api_key="unused", max_retries=0) as client:
        yield client


@pytest.fixture
async def anthropic_client(sidecar: RunningSidecar) -> AsyncIterator[anthropic.AsyncAnthropic]:
    base_url = f"http://127.0.0.1:{sidecar.port}"
    async with anthropic.AsyncAnthropic(
        base_url=base_url, api_key="unused", max_retries=0
    ) as client:
        yield client


def _prompt_tokens(standin: StandinServer) -> int:
    """What the stand-in counted for the last request it got (it answers with that)."""
    return standin.config.prompt_tokens_fn(orjson.loads(standin.requests[-1].body))


async def test_chat_completion_parses(
    openai_client: openai.AsyncOpenAI, standin: StandinServer
) -> None:
    completion = await openai_client.chat.completions.create(
        model=QWEN,
        max_tokens=MAX_TOKENS,
        messages=[{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": IMAGE}},
            {"type": "text", "text": "What is in this picture?"}]}],
    )  # fmt: skip
    choice = completion.choices[0]
    assert (choice.finish_reason, choice.message.role) == ("length", "assistant")
    assert choice.message.content
    assert completion.usage is not None
    assert completion.usage.completion_tokens == MAX_TOKENS
    assert completion.usage.prompt_tokens == _prompt_tokens(standin)
    assert completion.system_fingerprint is not None


async def test_chat_completion_stream_parses(
    openai_client: openai.AsyncOpenAI, standin: StandinServer
) -> None:
    stream = await openai_client.chat.completions.create(
        model=QWEN,
        max_tokens=MAX_TOKENS,
        messages=[{"role": "user", "content": "Describe the sky."}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert text
    assert finishes[-1] == "length"
    assert all(finish is None for finish in finishes[:-1])
    usage = chunks[-1].usage
    assert chunks[-1].choices == []
    assert usage is not None
    assert (usage.prompt_tokens, usage.completion_tokens) == (_prompt_tokens(standin), 4)


async def test_responses_create_parses(
    openai_client: openai.AsyncOpenAI, standin: StandinServer
) -> None:
    response = await openai_client.responses.create(
        model=QWEN,
        max_output_tokens=MAX_TOKENS,
        input=[{"role": "user", "content": [
            {"type": "input_text", "text": "What is this?"},
            {"type": "input_image", "image_url": IMAGE, "detail": "auto"}]}],
    )  # fmt: skip
    assert response.output_text
    assert response.status == "incomplete"
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "max_output_tokens"
    assert response.usage is not None
    assert response.usage.input_tokens == _prompt_tokens(standin)


async def test_responses_stream_parses(
    openai_client: openai.AsyncOpenAI, standin: StandinServer
) -> None:
    async with openai_client.responses.stream(
        model=QWEN, input="Say something.", max_output_tokens=MAX_TOKENS
    ) as stream:
        kinds = [event.type async for event in stream]
        final = await stream.get_final_response()
    assert kinds[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert kinds[-1] == "response.completed"
    assert "response.output_text.delta" in kinds
    assert final.output_text
    assert final.usage is not None
    assert final.usage.input_tokens == _prompt_tokens(standin)


async def test_anthropic_messages_create_parses(
    anthropic_client: anthropic.AsyncAnthropic, standin: StandinServer
) -> None:
    message = await anthropic_client.messages.create(
        model=QWEN,
        max_tokens=MAX_TOKENS,
        system="Be brief.",
        messages=[{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg",
                                         "data": IMAGE.split(",", 1)[1]}},
            {"type": "text", "text": "Describe."}]}],
    )  # fmt: skip
    assert (message.role, message.stop_reason) == ("assistant", "max_tokens")
    assert message.content[0].type == "text"
    assert message.usage.input_tokens == _prompt_tokens(standin)
    assert message.usage.output_tokens == MAX_TOKENS


async def test_anthropic_messages_stream_parses(
    anthropic_client: anthropic.AsyncAnthropic, standin: StandinServer
) -> None:
    async with anthropic_client.messages.stream(
        model=QWEN, max_tokens=MAX_TOKENS, messages=[{"role": "user", "content": "Hello."}]
    ) as stream:
        text = "".join([piece async for piece in stream.text_stream])
        final = await stream.get_final_message()
    assert text
    assert final.stop_reason == "max_tokens"
    assert final.usage.input_tokens == _prompt_tokens(standin)
    assert final.usage.output_tokens == MAX_TOKENS
