"""text.chat_template: rendering as transformers 5 renders for vLLM 0.33, checked against
transformers' own ``render_jinja_template`` on the real Qwen templates, and vLLM's keyword
filtering (``resolve_chat_template_kwargs``)."""

from __future__ import annotations

from typing import Any

import pytest
from transformers.utils.chat_template_utils import render_jinja_template

from sidecar.text.chat_template import TEMPLATE_CACHE_SIZE, compiled, render
from sidecar.text.conversation import ChatTemplateError
from tests.support.paths import DATA, ROOT

QWEN2 = (DATA / "qwen2_vl_chat_template.jinja").read_text()
QWEN3 = (ROOT / "tests" / "real_vllm" / "qwen3_vl_chat_template.jinja").read_text()
SPECIAL = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
TOOL = {"type": "function", "function": {"name": "f", "description": None, "parameters": {}}}


def text(value: str) -> dict[str, str]:
    return {"type": "text", "text": value}


CHATS = {
    "one-turn": [{"role": "user", "content": [text("Hi"), {"type": "image"}]}],
    "continue-string": [{"role": "user", "content": [text("Q")]},
                        {"role": "assistant", "content": "The answer is"}],
    "continue-parts": [{"role": "user", "content": [text("Q")]},
                       {"role": "assistant", "content": [text("A,"), text(" then ")]}],
    "continue-trailing-space": [{"role": "user", "content": [text("Q")]},
                                {"role": "assistant", "content": [text("Sure: ")]}],
    "tool-call": [{"role": "user", "content": [text("Q")]}, {"role": "assistant",
        "content": [], "tool_calls": [{"function": {"name": "f", "arguments": {"x": "ü"}}}]},
        {"role": "tool", "content": "r"}],
}  # fmt: skip


@pytest.mark.parametrize("source", [QWEN2, QWEN3], ids=["qwen2-vl", "qwen3-vl"])
@pytest.mark.parametrize("name", CHATS)
@pytest.mark.parametrize("tools", [None, [TOOL]], ids=["no-tools", "tools"])
def test_render_equals_transformers(
    source: str, name: str, tools: list[dict[str, Any]] | None
) -> None:
    chat = CHATS[name]
    continuing = name.startswith("continue")
    kwargs = {"add_generation_prompt": not continuing, "continue_final_message": continuing,
              "add_vision_id": True}  # fmt: skip
    ours = render(compiled(source), chat, tools=tools, kwargs=kwargs, special_tokens=SPECIAL)
    [theirs], _ = render_jinja_template(
        conversations=[chat], tools=tools, chat_template=source, **SPECIAL, **kwargs
    )
    assert ours == theirs


def test_request_kwargs_reach_the_template_only_when_it_reads_them() -> None:
    source = "{{ add_vision_id }}|{{ foo | default('unset') }}|{{ eos_token }}|{{ padding }}"
    kwargs = {"add_vision_id": True, "foo": "bar", "padding": "x", "eos_token": "EOS"}
    template = compiled(source)
    rendered = render(template, [{"role": "user"}], tools=None, kwargs=kwargs,
                      special_tokens=SPECIAL)  # fmt: skip
    # foo and padding: the template reads them, but padding is apply_chat_template's own.
    assert rendered == "True|bar|EOS|"


def test_documents_and_tools_are_template_variables() -> None:
    template = compiled("{{ documents[0].title }} {{ tools | length }}")
    kwargs = {"documents": [{"title": "T", "text": "x"}]}
    assert render(template, [{"role": "user"}], tools=[TOOL], kwargs=kwargs,
                  special_tokens={}) == "T 1"  # fmt: skip


def test_the_generation_tag_renders_its_body() -> None:
    template = compiled("{% generation %}body{% endgeneration %}!")
    assert render(template, [{"role": "user"}], tools=None, kwargs={}, special_tokens={}) == (
        "body!"
    )


@pytest.mark.parametrize(
    ("source", "messages", "kwargs"),
    [
        ("{{ raise_exception('no') }}", [{"role": "user"}], {}),
        ("{{ x.y.z }}", [{"role": "user"}], {}),
        (QWEN2, [], {}),
        (QWEN2, [{"role": "user", "content": "x"}],
         {"add_generation_prompt": True, "continue_final_message": True}),
        (QWEN2, [{"role": "user", "content": [{"type": "image"}]}],
         {"continue_final_message": True}),
        (QWEN2, [{"role": "user", "content": None}], {"continue_final_message": True}),
        ("{{ messages[0].role }}", [{"role": "user", "content": "x"}],
         {"continue_final_message": True}),
        ("{{ messages }}", [{"role": "user"}], {"messages": []}),
        (QWEN2, [{"role": "user", "content": "x"}], {"sanitize_control_tokens": True}),
    ],
    ids=["raise", "undefined", "empty", "both-prompts", "no-text-to-continue", "null-content",
         "template-drops-final", "messages-twice", "sanitize"],
)  # fmt: skip
def test_what_transformers_refuses_is_a_chat_template_error(
    source: str, messages: list[dict[str, Any]], kwargs: dict[str, Any]
) -> None:
    with pytest.raises(ChatTemplateError):
        render(compiled(source), messages, tools=None, kwargs=kwargs, special_tokens={})


def test_a_template_that_does_not_compile_is_refused() -> None:
    with pytest.raises(ChatTemplateError):
        compiled("{% for %}")


def test_templates_are_compiled_once_and_the_cache_is_bounded() -> None:
    assert compiled(QWEN2) is compiled(QWEN2)
    info = compiled.cache_info()
    assert info.maxsize == TEMPLATE_CACHE_SIZE
    for n in range(TEMPLATE_CACHE_SIZE + 5):
        compiled(f"template {n}")
    assert compiled.cache_info().currsize == TEMPLATE_CACHE_SIZE
