"""Request shapes sent to real vLLM, shared by ``smoke.py`` and ``record.py``.

Every case is a route plus a JSON body, so it can go through the official SDKs (smoke) or as
raw bytes (record). Images are PNGs drawn with Pillow from a fixed seed, sent inline as data
URIs or Anthropic base64 blocks; sizes are picked to exercise each branch of Qwen's resize:
below ``min_pixels`` (upscaled), a plain size, a non-multiple of 28, and one above the tiny
models' ``max_pixels`` (downscaled).
"""

from __future__ import annotations

import base64
import io
import random
from dataclasses import dataclass, field
from typing import Any

from PIL import Image

IMAGE_SIZES = ((32, 32), (224, 224), (640, 480), (1000, 333), (1920, 1080))


def png_bytes(width: int, height: int, seed: int = 0) -> bytes:
    """A deterministic noisy PNG (noise keeps it from compressing to nothing)."""
    rng = random.Random(seed * 100003 + width * 31 + height)
    image = Image.new("RGB", (width, height), (rng.randrange(256), 90, 160))
    pixels = image.load()
    assert pixels is not None
    for _ in range(min(width * height // 8, 4000)):
        pixels[rng.randrange(width), rng.randrange(height)] = (
            rng.randrange(256), rng.randrange(256), rng.randrange(256),
        )  # fmt: skip
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


def data_uri(width: int, height: int, seed: int = 0) -> str:
    return "data:image/png;base64," + base64.b64encode(png_bytes(width, height, seed)).decode()


def image_part(width: int, height: int, seed: int = 0) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": data_uri(width, height, seed)}}


def anthropic_image(width: int, height: int, seed: int = 0) -> dict[str, Any]:
    data = base64.b64encode(png_bytes(width, height, seed)).decode()
    return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}


@dataclass(frozen=True)
class Case:
    """One request: where it goes and what it says."""

    name: str
    route: str  # "/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages"
    body: dict[str, Any]
    note: str = ""
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))


def chat(model: str, messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": messages, "max_tokens": 4, "temperature": 0} | extra


def user(*parts: dict[str, Any] | str) -> dict[str, Any]:
    content = [{"type": "text", "text": p} if isinstance(p, str) else p for p in parts]
    return {"role": "user", "content": content}


def smoke_cases(model: str) -> list[Case]:
    """The request shapes whose prompt-token prediction smoke.py compares with vLLM."""
    cases = [
        Case("chat-text", "/v1/chat/completions",
             chat(model, [{"role": "user", "content": "Describe the colour of the sky."}])),
        Case("chat-system-text", "/v1/chat/completions", chat(model, [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "How many legs has a spider?"}])),
        Case("chat-multiturn", "/v1/chat/completions", chat(model, [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello! How can I help?"},
            {"role": "user", "content": "Tell me about 12345 apples."}])),
    ]  # fmt: skip
    for width, height in IMAGE_SIZES:
        cases.append(
            Case(
                f"chat-image-{width}x{height}",
                "/v1/chat/completions",
                chat(model, [user(image_part(width, height), "What is in this picture?")]),
            )
        )
    cases += [
        Case("chat-3-images", "/v1/chat/completions", chat(model, [user(
            image_part(640, 480, 1), "and", image_part(224, 224, 2), image_part(1000, 333, 3),
            "Compare them.")])),
        Case("chat-image-only", "/v1/chat/completions",
             chat(model, [user(image_part(640, 480, 4))])),
        Case("chat-image-typeless", "/v1/chat/completions", chat(model, [user(
            {"image_url": data_uri(300, 200, 5)}, "type-less part")]),
             note='{"image_url": "<data uri>"} with no "type"'),
        Case("chat-input_image", "/v1/chat/completions", chat(model, [user(
            {"type": "input_image", "image_url": data_uri(300, 200, 6)}, "input_image part")]),
             note="Responses-style part in chat, no detail: vLLM 0.32 wants detail"),
        Case("chat-input_image-detail", "/v1/chat/completions", chat(model, [user(
            {"type": "input_image", "image_url": data_uri(300, 200, 6), "detail": "auto"},
            "input_image part")]), note="Responses-style part in chat"),
        Case("chat-image-stream-usage", "/v1/chat/completions", chat(
            model, [user(image_part(640, 480, 7), "Stream it.")], stream=True,
            stream_options={"include_usage": True})),
        Case("chat-text-stream-no-usage", "/v1/chat/completions", chat(
            model, [{"role": "user", "content": "No usage chunk."}], stream=True),
             note="no usage in the stream: nothing observed"),
        Case("completions-text", "/v1/completions",
             {"model": model, "prompt": "Once upon a time", "max_tokens": 4, "temperature": 0}),
        Case("completions-stream-usage", "/v1/completions", {
            "model": model, "prompt": "The quick brown fox", "max_tokens": 4, "stream": True,
            "stream_options": {"include_usage": True}}),
        Case("responses-text", "/v1/responses",
             {"model": model, "input": "Say something.", "max_output_tokens": 4}),
        Case("responses-instructions-image", "/v1/responses", {
            "model": model, "instructions": "Be brief.", "max_output_tokens": 4,
            "input": [{"role": "user", "content": [
                {"type": "input_text", "text": "What is this?"},
                {"type": "input_image", "image_url": data_uri(640, 480, 8)}]}]}),
        Case("responses-image-stream", "/v1/responses", {
            "model": model, "max_output_tokens": 4, "stream": True,
            "input": [{"role": "user", "content": [
                {"type": "input_image", "image_url": data_uri(224, 224, 9)},
                {"type": "input_text", "text": "Stream."}]}]}),
        Case("messages-text", "/v1/messages", {
            "model": model, "max_tokens": 4,
            "messages": [{"role": "user", "content": "Hello, Claude-shaped API."}]}),
        Case("messages-system-image", "/v1/messages", {
            "model": model, "max_tokens": 4, "system": "You describe images.",
            "messages": [{"role": "user", "content": [
                anthropic_image(640, 480, 10), {"type": "text", "text": "Describe."}]}]}),
        Case("messages-image-stream", "/v1/messages", {
            "model": model, "max_tokens": 4, "stream": True,
            "messages": [{"role": "user", "content": [
                anthropic_image(1920, 1080, 11), {"type": "text", "text": "Stream."}]}]}),
    ]  # fmt: skip
    return cases


def _text_chat(model: str, text: str, **extra: Any) -> dict[str, Any]:
    return chat(model, [{"role": "user", "content": text}], **extra)


def engine_cases(model: str) -> list[Case]:
    """Every request shape the real-engine tier prices: ``smoke_cases`` plus the other routes
    the engine serves (chat batch, completions lists and token ids, count_tokens, tokenize,
    the render routes) and the stream variants."""
    usage = {"include_usage": True}
    image = user(image_part(640, 480, 20), "What is in this picture?")
    return [
        # vLLM 0.32 refuses an input_image part without "detail" (400): an error case, below.
        *(case for case in smoke_cases(model) if case.name != "chat-input_image"),
        Case("chat-stream-usage", "/v1/chat/completions",
             _text_chat(model, "Stream with usage.", stream=True, stream_options=usage)),
        Case("chat-developer-tools", "/v1/chat/completions", chat(model, [
            {"role": "developer", "content": "Answer in JSON."},
            {"role": "user", "content": "What is 2 + 2?"}], tools=[{"type": "function",
            "function": {"name": "add", "description": "Add two numbers.", "parameters": {
                "type": "object", "properties": {"a": {"type": "number"},
                                                 "b": {"type": "number"}}}}}],
            tool_choice="none"), note="tools are rendered into the prompt"),
        Case("chat-tool-integer-past-64-bits", "/v1/chat/completions", chat(model, [
            {"role": "user", "content": "Pick a number."}], tools=[{"type": "function",
            "function": {"name": "pick", "parameters": {"type": "object", "properties": {
                "n": {"type": "integer", "minimum": -(2**63) - 1, "maximum": 10**20}}}}}],
            tool_choice="none"), note="integers orjson reads as floats, rendered whole"),
        Case("messages-count-tokens-tool-integer-past-64-bits", "/v1/messages/count_tokens", {
            "model": model, "messages": [{"role": "user", "content": "Pick a number."}],
            "tools": [{"name": "pick", "input_schema": {"type": "object", "properties": {
                "n": {"type": "integer", "maximum": 726089013388318475685432051892224}}}}],
            "tool_choice": {"type": "none"}},
            note="the differential tier's find, made small"),
        Case("chat-max-completion-tokens", "/v1/chat/completions", {
            "model": model, "messages": [image], "max_completion_tokens": 2, "temperature": 0}),
        Case("chat-truncate-prompt-tokens", "/v1/chat/completions", {
            "model": model, "messages": [{"role": "user", "content": "Tell me a long story."}],
            "truncate_prompt_tokens": 3, "max_tokens": 2, "temperature": 0},
            note="vLLM keeps the last 3 prompt tokens"),
        Case("chat-image-truncate-prompt-tokens", "/v1/chat/completions", {
            "model": model, "messages": [image, {"role": "user", "content": (
                "Again, and tell me more about the colours and the shapes in it, please, "
                "one by one and in as much detail as you can.")}],
            "truncate_prompt_tokens": 420, "truncation_side": "right", "max_tokens": 2,
            "temperature": 0},
            note="the end cut where the prompt is longer (Qwen2.5-VL), the image kept whole"),
        Case("completions-list-truncate-prompt-tokens", "/v1/completions", {
            "model": model, "prompt": ["Once upon a time there was", "The quick brown fox"],
            "truncate_prompt_tokens": 2, "max_tokens": 2, "temperature": 0},
            note="each prompt cut to 2"),
        Case("chat-lax-scalars", "/v1/chat/completions", {
            "model": model, "messages": [{"role": "user", "content": "Tell me a long story."}],
            "max_tokens": "2", "n": True, "stream": "false", "truncate_prompt_tokens": "4",
            "add_generation_prompt": "yes", "temperature": 0},
            note="vLLM's lax fields: the strings and true read as 2, 1, False, 4 and True"),
        Case("completions-lax-token-ids", "/v1/completions", {
            "model": model, "prompt": [9707, "11", True, 0.0], "max_tokens": "2",
            "add_special_tokens": "off", "temperature": 0},
            note="a list vLLM reads as 4 token ids"),
        Case("generative-scoring-query-token-ids", "/generative_scoring", {
            "model": model, "query": ["140", 11], "items": ["Yes it is", "No"],
            "label_token_ids": [140]},
            note="vLLM's query is str | list[int]: the list is 2 token ids before each item"),
        Case("completions-list", "/v1/completions", {
            "model": model, "prompt": ["Once upon a time", "The quick brown fox jumps"],
            "max_tokens": 2, "temperature": 0}, note="two prompts: usage sums them"),
        Case("completions-token-ids", "/v1/completions", {
            "model": model, "prompt": [9707, 11, 1879, 0], "max_tokens": 2, "temperature": 0}),
        Case("completions-stream", "/v1/completions", {
            "model": model, "prompt": "No usage requested.", "max_tokens": 2, "stream": True,
            "temperature": 0}, note="usage from the sidecar's log (forced stream usage)"),
        Case("chat-batch", "/v1/chat/completions/batch", {
            "model": model, "max_tokens": 2, "temperature": 0, "messages": [
                [{"role": "user", "content": "Describe the colour of the sky."}],
                [image, {"role": "assistant", "content": "A cat."},
                 {"role": "user", "content": "Are you sure?"}]]}),
        Case("responses-stream-text", "/v1/responses", {
            "model": model, "input": "Say something.", "max_output_tokens": 2,
            "stream": True, "temperature": 0}),
        Case("messages-stream-text", "/v1/messages", {
            "model": model, "max_tokens": 2, "stream": True, "temperature": 0,
            "system": [{"type": "text", "text": "Be brief."}],
            "messages": [{"role": "user", "content": "Hello there."}]}),
        Case("messages-count-tokens", "/v1/messages/count_tokens", {
            "model": model, "system": "Count me.", "messages": [{"role": "user", "content": [
                anthropic_image(224, 224, 21), {"type": "text", "text": "Describe."}]}]}),
        # vLLM's conversion skips an image block without a source and every image of the
        # system field: they cost nothing, and the one real image is priced alone.
        Case("messages-count-tokens-skipped-images", "/v1/messages/count_tokens", {
            "model": model, "system": [anthropic_image(64, 64, 24),
                                       {"type": "text", "text": "Count me."}],
            "messages": [{"role": "user", "content": [
                {"type": "image"}, {"type": "image", "source": {}},
                anthropic_image(224, 224, 25), {"type": "text", "text": "Describe."}]}]}),
        Case("tokenize-prompt", "/tokenize", {"model": model, "prompt": "Once upon a time"}),
        Case("tokenize-chat", "/tokenize", {
            "model": model, "messages": [image], "add_generation_prompt": True}),
        Case("render-chat", "/v1/chat/completions/render", chat(model, [image])),
        Case("render-completions", "/v1/completions/render", {
            "model": model, "prompt": ["Once upon a time", "The quick brown fox"]}),
        Case("render-responses", "/v1/responses/render", {
            "model": model, "instructions": "Be brief.", "input": [{"role": "user", "content": [
                {"type": "input_text", "text": "What is this?"},
                {"type": "input_image", "image_url": data_uri(224, 224, 22)}]}]}),
        Case("render-messages", "/v1/messages/render", {
            "model": model, "max_tokens": 4, "messages": [{"role": "user", "content": [
                anthropic_image(640, 480, 23), {"type": "text", "text": "Describe."}]}]}),
    ]  # fmt: skip
