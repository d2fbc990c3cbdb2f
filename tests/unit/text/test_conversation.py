"""text.conversation: chat messages as vLLM 0.33 hands them to the template, rule by rule
(``renderers/chat_utils/chat_message.py`` and ``renderers/hf.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from sidecar.text.conversation import ChatTemplateError, conversation
from sidecar.text.text_tokens import QWEN_PLACEHOLDERS

IMAGE = {"type": "image_url", "image_url": {"url": "<image 0>"}}
PLACEHOLDER = QWEN_PLACEHOLDERS["image"]


def openai(*messages: dict[str, Any], developer: bool = False) -> list[dict[str, Any]]:
    return conversation(list(messages), "openai", QWEN_PLACEHOLDERS, developer_role=developer)


def string(*messages: dict[str, Any]) -> list[dict[str, Any]]:
    return conversation(list(messages), "string", QWEN_PLACEHOLDERS, developer_role=False)


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def test_openai_format_wraps_every_text_like_part_and_media_part() -> None:
    parts = [text("a"), {"type": "thinking", "thinking": "t"}, {"type": "refusal", "refusal": "r"},
             {"type": "input_text", "text": "i"}, "bare", IMAGE, {"image_url": "u"},
             {"type": "input_image", "image_url": "u", "detail": "low"},
             {"type": "video_url", "video_url": {"url": "v"}},
             {"type": "tool_reference", "name": "search"}]  # fmt: skip
    [message] = openai({"role": "user", "content": parts})
    assert message["content"] == [
        text("a"), text("t"), text("r"), text("i"), text("bare"), {"type": "image"},
        {"type": "image"}, {"type": "image", "detail": "low"}, {"type": "video"},
        {"type": "tool_reference", "name": "search"},
    ]  # fmt: skip


def test_a_string_content_becomes_one_text_part_and_null_becomes_empty() -> None:
    assert openai({"role": "user", "content": "hi"})[0]["content"] == [text("hi")]
    assert openai({"role": "assistant", "content": None})[0]["content"] == []
    assert string({"role": "assistant", "content": None})[0]["content"] == ""


def test_unknown_part_keys_reach_the_template_and_null_text_is_skipped() -> None:
    part = {"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}
    skipped = {"type": "text", "text": None}
    [message] = openai({"role": "user", "content": [part, skipped, {**IMAGE, "image": 1}]})
    assert message["content"] == [{**part}, {"type": "image", "image": 1}]


def test_string_format_joins_texts_and_puts_missing_placeholders_first() -> None:
    [message] = string({"role": "user", "content": [text("one"), IMAGE, text("two"), IMAGE]})
    assert message["content"] == f"{PLACEHOLDER}\n{PLACEHOLDER}\none\ntwo"
    [typed] = string({"role": "user", "content": [IMAGE, text(f"see {PLACEHOLDER}")]})
    assert typed["content"] == f"see {PLACEHOLDER}"  # the typed one stands for the image
    [only] = string({"role": "user", "content": [IMAGE]})
    assert only["content"] == PLACEHOLDER


def test_more_typed_placeholders_than_images_is_refused_in_string_format() -> None:
    with pytest.raises(ChatTemplateError):
        string({"role": "user", "content": [IMAGE, text(PLACEHOLDER * 2)]})


def test_the_billing_header_line_leaves_system_text_parts_only() -> None:
    header = "x-anthropic-billing-header: cch=1"
    [system, user] = openai(
        {"role": "system", "content": [text(f"{header}\nkept"), text(header), "plain"]},
        {"role": "user", "content": f"{header}\nuser keeps it"},
    )
    assert system["content"] == [text("kept"), text("plain")]
    assert user["content"] == [text(f"{header}\nuser keeps it")]


def test_tool_text_parts_are_joined_but_a_tool_image_keeps_the_list() -> None:
    joined = openai({"role": "tool", "tool_call_id": "c", "content": [text("1"), text("2")]})
    assert joined == [{"role": "tool", "content": "1\n2", "tool_call_id": "c"}]
    kept = openai({"role": "tool", "content": [text("1"), IMAGE]})[0]["content"]
    assert kept == [text("1"), {"type": "image"}]
    assert openai({"role": "tool", "content": []})[0]["content"] == ""


def test_assistant_tool_call_arguments_become_objects_and_reasoning_is_copied() -> None:
    calls = [{"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": a}}
             for i, a in enumerate(['{"x": 1}', "not json", "[1]", "", {"y": 2}])]  # fmt: skip
    [message] = openai({"role": "assistant", "content": "ok", "tool_calls": calls,
                        "reasoning_content": "why"})  # fmt: skip
    assert [c["function"]["arguments"] for c in message["tool_calls"]] == [
        {"x": 1}, {}, {}, {}, {"y": 2}]  # fmt: skip
    assert message["reasoning"] == message["reasoning_content"] == "why"
    assert calls[0]["function"]["arguments"] == '{"x": 1}'  # the request is not changed
    assert "tool_calls" not in openai({"role": "assistant", "content": "", "tool_calls": []})[0]


def test_tool_calls_vllm_refuses_are_refused() -> None:
    bad = [{"type": "custom", "function": {"name": "f"}}]
    with pytest.raises(ChatTemplateError):
        openai({"role": "assistant", "content": "", "tool_calls": bad})


def test_names_and_tasks_are_kept() -> None:
    [message] = openai({"role": "user", "content": "x", "name": "ann", "task": "t", "n": 1})
    assert message == {"role": "user", "content": [text("x")], "name": "ann", "task": "t"}


def test_developer_messages_become_one_leading_system_message() -> None:
    result = openai(
        {"role": "system", "content": "S"},
        {"role": "user", "content": "u"},
        {"role": "developer", "content": [text("D1"), IMAGE, text("D2")], "tools": []},
        {"role": "developer", "content": ""},
    )
    assert result == [
        {"role": "system", "content": "S\n\nD1\nD2"},
        {"role": "user", "content": [text("u")]},
    ]


def test_a_lone_leading_developer_message_is_just_renamed() -> None:
    [message, _] = openai({"role": "developer", "content": "D", "tools": [1]},
                          {"role": "user", "content": "u"})  # fmt: skip
    assert message == {"role": "system", "content": [text("D")]}


def test_a_template_that_names_the_developer_role_keeps_it() -> None:
    [message] = openai({"role": "developer", "content": "D"}, developer=True)
    assert message == {"role": "developer", "content": [text("D")], "tools": None}


@pytest.mark.parametrize(
    "message",
    [
        {"content": "no role"},
        {"role": "user", "content": 5},
        {"role": "user", "content": [5]},
        {"role": "user", "content": [{"type": "input_file", "file_id": "f"}]},
        {"role": "user", "content": [{"type": "text", "text": "t", "uuid": "u"}]},
        {"role": "user", "content": [{"type": "prompt_embeds", "data": "x"}]},
        {"role": "user", "content": [{"uuid": "u", "prompt_embeds": "x"}]},
    ],
    ids=[
        "no-role",
        "number",
        "number-part",
        "unknown-type",
        "text-with-uuid",
        "prompt-embeds",
        "typeless-prompt-embeds",
    ],
)
def test_shapes_vllm_refuses_are_not_rendered(message: dict[str, Any]) -> None:
    with pytest.raises(ChatTemplateError):
        openai(message)


def test_string_format_renders_tool_references_as_their_names() -> None:
    [message] = string({"role": "tool", "content": [{"type": "tool_reference", "name": "s"}]})
    assert message["content"] == "s"


def test_string_format_needs_a_placeholder_for_each_modality() -> None:
    audio = {"type": "audio_url", "audio_url": {"url": "a"}}
    with pytest.raises(ChatTemplateError):
        string({"role": "user", "content": [audio]})
