"""A chat template's framing, measured by rendering it once with probe conversations.

The estimate (``text_estimate``) adds a template's framing to the text it estimates: a fixed
part, a part per message and a tool preamble. ``measure_overhead`` renders the template with
empty messages (one user turn; user, assistant, user; a system turn first; one probe tool)
and counts the differences with the tokenizer when there is one, else with the text estimate
of the rendered framing (an added token such as ``<|im_start|>`` is one token but twelve
characters, so that count is generous). ``learned_overhead`` does this for a model directory
with a chat template, at start-up; the built-in constants (``FAMILY_OVERHEADS``) are what it
gives for the Qwen families' real templates and tokenizer.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from tokenizers import Tokenizer

from sidecar.body.refs import SequenceRef
from sidecar.text.chat_template import compiled, render
from sidecar.text.conversation import ChatTemplateError, conversation
from sidecar.text.text_estimate import TemplateOverhead, text_estimate
from sidecar.text.text_tokens import QWEN_PLACEHOLDERS, read_template

PROBE_TOOL = {"type": "function", "function": {"name": "probe", "description": "A probe.",
    "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}  # fmt: skip
_ROLES = {"user": "user", "assistant": "assistant", "system": "system"}


def measure_overhead(
    source: str, count: Callable[[str], int], special_tokens: dict[str, str]
) -> TemplateOverhead:
    """The framing of ``source``, its renders counted with ``count``; ``ChatTemplateError``
    when the template does not render the probes."""
    template = compiled(source)

    def tokens(roles: list[str], tools: list[dict[str, Any]] | None = None) -> int:
        messages = conversation(
            [{"role": _ROLES[role], "content": ""} for role in roles],
            template.content_format,
            QWEN_PLACEHOLDERS,
            developer_role=template.developer_role,
        )
        kwargs = {"add_generation_prompt": True}
        text = render(template, messages, tools=tools, kwargs=kwargs, special_tokens=special_tokens)
        return count(text)

    one = tokens(["user"])
    per_message = math.ceil((tokens(["user", "assistant", "user"]) - one) / 2)
    # A template may print a default system prompt unless the conversation has its own.
    fixed = max(one - per_message, tokens(["system", "user"]) - 2 * per_message)
    probe_json = orjson.dumps(PROBE_TOOL).decode()
    probe_estimate = text_estimate(SequenceRef.of_text(probe_json), chars_per_token=3.0)
    tools = max(0, tokens(["user"], [PROBE_TOOL]) - one - probe_estimate)
    return TemplateOverhead(max(0, fixed), max(0, per_message), tools)


def learned_overhead(directory: Path, chars_per_token: float) -> TemplateOverhead | None:
    """The framing of a model directory's own template (None without one, or when it does
    not render the probes): counted with its tokenizer when it has ``tokenizer.json``."""
    source, special = read_template(directory)
    if source is None:
        return None
    tokenizer_file = directory / "tokenizer.json"
    count: Callable[[str], int]
    if tokenizer_file.is_file():
        tokenizer = Tokenizer.from_file(str(tokenizer_file))

        def count(text: str) -> int:
            return len(tokenizer.encode(text, add_special_tokens=False).ids)
    else:

        def count(text: str) -> int:
            return text_estimate(SequenceRef.of_text(text), chars_per_token)

    try:
        return measure_overhead(source, count, special)
    except ChatTemplateError:
        return None
