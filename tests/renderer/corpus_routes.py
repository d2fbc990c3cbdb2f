"""The renderer tier's completions, Responses and Anthropic Messages requests."""

from __future__ import annotations

from typing import Any

from tests.real_vllm.cases import anthropic_image
from tests.renderer.corpus import (
    COMPLETIONS,
    MESSAGES,
    ODD_TEXTS,
    RESPONSES,
    SIZES,
    Case,
    ImageUrl,
    image,
)

BILLING = "x-anthropic-billing-header: cch=9"


def route_cases(model: str, image_url: ImageUrl) -> list[Case]:
    return [
        *completion_cases(model),
        *response_cases(model, image_url),
        *message_cases(model, image_url),
    ]


# fmt: off
def completion_cases(model: str) -> list[Case]:
    def completion(name: str, prompt: Any, **extra: Any) -> Case:
        return Case(f"completions-{name}", COMPLETIONS, {"model": model, "prompt": prompt,
            "max_tokens": 4, **extra})

    cases = [
        completion("text", "Once upon a time"),
        completion("list", ["First prompt.", "Second, longer prompt with more words."]),
        completion("ids", [1, 2, 3, 4, 5]),
        completion("id-lists", [[10, 20, 30], [40, 50]]),
        completion("no-special", "plain", add_special_tokens=False),
        completion("chat-markup", "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"),
        completion("single-space", " "),
        completion("long", "lorem ipsum dolor " * 300),
        completion("list-odd", list(ODD_TEXTS.values())),
    ]
    return cases + [completion(f"odd-{key}", text) for key, text in ODD_TEXTS.items()]


def _item(role: str, *parts: dict[str, Any] | str) -> dict[str, Any]:
    return {"role": role, "content": [
        {"type": "input_text", "text": p} if isinstance(p, str) else p for p in parts]}


def _input_image(n: int, **extra: Any) -> dict[str, Any]:
    return {"type": "input_image", "image_url": image(n), **extra}


CALL = {"type": "function_call", "call_id": "c1", "name": "get_weather",
        "arguments": '{"city": "Oslo"}'}
OUTPUT = {"type": "function_call_output", "call_id": "c1", "output": "-3C, snow"}
REASONING = {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Sum."}],
             "content": [{"type": "reasoning_text", "text": "Think."}]}
TOOL = {"type": "function", "name": "get_weather", "description": "Weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}


def _said(text: str, **extra: Any) -> dict[str, Any]:
    return {"type": "message", "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}], **extra}


def response_cases(model: str, image_url: ImageUrl) -> list[Case]:
    def response(name: str, value: Any, **extra: Any) -> Case:
        return Case(f"responses-{name}", RESPONSES, {"model": model, "input": value, **extra})

    cases = [
        response("string", "Tell me a joke."),
        response("instructions", "Tell me a joke.", instructions="Be brief."),
        response("items", [_item("user", "Hi"), {"role": "assistant", "content": "Hello"},
                           _item("user", "Bye")]),
        response("easy-messages", [{"role": "user", "content": "plain"},
                                   {"role": "assistant", "content": "reply"},
                                   {"role": "user", "content": "more"}]),
        response("system-developer", [_item("system", "Sys."), _item("developer", "Dev."),
                                      _item("user", "Go")]),
        response("developer-late", [_item("user", "Go"), _item("developer", "Late.")]),
        response("instructions-and-developer", [_item("developer", "Dev."), _item("user", "Go")],
                 instructions="Inst."),
        response("image", [_item("user", _input_image(1), "What is this?")]),
        response("image-no-detail", [_item("user", _input_image(2), "no detail given")]),
        response("image-details", [_item("user", _input_image(3, detail="high"),
                                         _input_image(4, detail="low"), "two")]),
        response("image-remote", [_item("user", {"type": "input_image",
            "image_url": image_url(300, 200)}, "remote")]),
        response("typed-message", [{"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "typed"}]}]),
        response("output-message", [_item("user", "Q"), {**_said("A1"), "content": [
            *_said("A1")["content"], *_said("A2")["content"]]}, _item("user", "Q2")]),
        response("continue", [_item("user", "Q"), _said("Partial", status="incomplete")]),
        response("continue-in-progress", [_item("user", "Q"),
                                          _said("Going", status="in_progress")]),
        response("completed-last", [_item("user", "Q"), _said("Done", status="completed")]),
        response("tool-loop", [_item("user", "Weather in Oslo?"), CALL, OUTPUT],
                 tools=[TOOL], tool_choice="none"),
        response("reasoning-then-call", [_item("user", "Weather?"), REASONING, CALL, OUTPUT]),
        response("said-then-call", [_item("user", "Weather?"), _said("Checking."), CALL,
                                    OUTPUT, _said("It snows.")]),
        response("two-calls", [_item("user", "Both?"), CALL, {**CALL, "call_id": "c2",
            "arguments": "{}"}, OUTPUT, {**OUTPUT, "call_id": "c2"}]),
        response("namespace-tools", "x", tools=[{"type": "namespace", "name": "ns",
            "description": "d", "tools": [{**TOOL, "name": "inner"}]}], tool_choice="none"),
        response("bare-tool", "x", tools=[{"type": "function", "name": "ping",
                                           "parameters": None}], tool_choice="none"),
        response("vision-id", [_item("user", _input_image(1), _input_image(2), "two")],
                 chat_template_kwargs={"add_vision_id": True}),
        response("billing-system", [_item("system", BILLING + "\nkept")]),
    ]
    return cases + [response(f"odd-{k}", [_item("user", t)], instructions=t)
                    for k, t in ODD_TEXTS.items()]


def _text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def _image(n: int) -> dict[str, Any]:
    width, height = SIZES[n % len(SIZES)]
    return anthropic_image(width, height, n)


USE = {"type": "tool_use", "id": "tu1", "name": "get_weather", "input": {"city": "Rome"}}
ANTHROPIC_TOOL = {"name": "get_weather", "description": "Weather", "input_schema": {
    "properties": {"city": {"type": "string"}}}}
HELLO = {"role": "user", "content": "Hi!"}


def message_cases(model: str, image_url: ImageUrl) -> list[Case]:
    def messages(name: str, turns: list[dict[str, Any]], **extra: Any) -> Case:
        return Case(f"messages-{name}", MESSAGES, {"model": model, "max_tokens": 8,
            "messages": turns, **extra})

    def result(content: Any) -> dict[str, Any]:
        return {"type": "tool_result", "tool_use_id": "tu1", "content": content}

    cases = [
        messages("string", [HELLO]),
        messages("system", [HELLO], system="Be nice."),
        messages("system-blocks", [HELLO], system=[_text("Part A. "), _text("Part B.")]),
        messages("billing-block", [HELLO], system=[_text(BILLING), _text("Real system.")]),
        messages("billing-string", [HELLO], system=BILLING + "\nkept whole"),
        messages("inline-system", [HELLO, {"role": "assistant", "content": "Hey"},
            {"role": "system", "content": "Reminder."}, HELLO]),
        messages("inline-system-blocks", [HELLO, {"role": "system", "content": [
            _text(BILLING), _text("Note "), _text("two.")]}, HELLO], system="Top."),
        messages("blocks", [{"role": "user", "content": [_text("one"), _text("two")]}]),
        messages("image", [{"role": "user", "content": [_image(1), _text("What?")]}]),
        messages("image-only", [{"role": "user", "content": [_image(2)]}]),
        messages("image-default-type", [{"role": "user", "content": [{"type": "image",
            "source": {"media_type": "image/png", "data": _image(3)["source"]["data"]}}]}]),
        messages("image-url", [{"role": "user", "content": [{"type": "image", "source": {
            "type": "url", "url": image_url(400, 300)}}, _text("remote")]}]),
        messages("multi-turn", [HELLO, {"role": "assistant", "content": [_text("Hello.")]},
            {"role": "user", "content": [_image(4), _text("Now this.")]}]),
        messages("thinking", [HELLO, {"role": "assistant", "content": [{"type": "thinking",
            "thinking": "pondering", "signature": "s"}, _text("Answer.")]}, HELLO]),
        messages("redacted-thinking", [HELLO, {"role": "assistant", "content": [
            {"type": "redacted_thinking", "data": "opaque"}, _text("Answer.")]}, HELLO]),
        messages("tool-use", [HELLO, {"role": "assistant", "content": [_text("Let me check."),
            USE]}, {"role": "user", "content": [result("22C")]}],
            tools=[ANTHROPIC_TOOL], tool_choice={"type": "none"}),
        messages("tool-result-blocks", [HELLO, {"role": "assistant", "content": [USE]},
            {"role": "user", "content": [result([_text("line a"), _text("line b")]),
            _text("Thanks")]}]),
        messages("tool-result-image", [HELLO, {"role": "assistant", "content": [USE]},
            {"role": "user", "content": [result([_text("screenshot:"), _image(5)])]}]),
        messages("tool-result-empty", [HELLO, {"role": "assistant", "content": [USE]},
            {"role": "user", "content": [result(None)]}]),
        messages("assistant-tool-result", [HELLO, {"role": "assistant", "content": [
            result("odd")]}, HELLO]),
        messages("assistant-tool-result-list", [HELLO, {"role": "assistant", "content": [
            result([_text("x")])]}, HELLO]),
        messages("empty-text-block", [{"role": "user", "content": [_text(""), _text("x")]}]),
        messages("vision-id", [{"role": "user", "content": [_image(1), _image(2)]}],
                 chat_template_kwargs={"add_vision_id": True}),
        messages("thinking-disabled", [HELLO], thinking={"type": "disabled"}),
    ]
    return cases + [messages(f"odd-{k}", [{"role": "user", "content": t}], system=t)
                    for k, t in ODD_TEXTS.items()]
# fmt: on
