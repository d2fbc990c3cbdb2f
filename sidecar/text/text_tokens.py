"""Exact prompt tokens from the model directory's own tokenizer and chat template.

When the model directory holds ``tokenizer.json`` and a chat template (``chat_template.jinja``,
``chat_template.json`` or ``tokenizer_config.json``), :class:`PromptCounter` counts a request's
prompt as vLLM 0.33 builds it:

* chat, Responses and Anthropic bodies become one :class:`ChatRequest` (``chat_request``,
  ``responses_input``, ``messages_input``), whose messages are rendered as vLLM renders them
  (``conversation``, ``chat_template``), then tokenized without special tokens unless the
  request asks;
* a completions prompt is tokenized alone, with the special tokens vLLM adds by default;
* each image placeholder token in the rendered prompt stands for the image's predicted count.
  A placeholder the user typed stays one token, as in vLLM, where it is not expanded either.

Families without a known placeholder keep the estimate; docs/supported-models.md says which.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment
from tokenizers import Tokenizer

from sidecar.text.chat_request import ChatRequest
from sidecar.text.chat_template import CompiledTemplate, compiled, render
from sidecar.text.conversation import ChatTemplateError, conversation
from sidecar.text.template_format import ContentFormat

SEGMENT_CACHE_SIZE = 16_384  # distinct text stretches remembered; each is a few hundred bytes

# prompt family (an architecture's ``prompt_family``) -> the placeholder token in the rendered
# prompt; QWEN_PLACEHOLDERS are vLLM's string-format placeholders of those families
IMAGE_PLACEHOLDERS = {
    "qwen2_vl": "<|image_pad|>",
    "qwen2_5_vl": "<|image_pad|>",
    "qwen3_vl": "<|image_pad|>",
}
QWEN_PLACEHOLDERS = {
    "image": "<|vision_start|><|image_pad|><|vision_end|>",
    "video": "<|vision_start|><|video_pad|><|vision_end|>",
}

__all__ = ["ChatTemplateError", "PromptCounter"]


@dataclass(frozen=True, slots=True)
class PromptCounter:
    """A tokenizer and the server's chat template, built once per process."""

    template: CompiledTemplate
    tokenizer: Tokenizer
    image_token_id: int
    image_token: str
    placeholders: Mapping[str, str]  # modality -> vLLM's string-format placeholder
    special_tokens: Mapping[str, str]
    added_tokens: re.Pattern[str] | None  # splits a prompt where the tokenizer splits it
    segment_tokens: Callable[[str], int]  # memoised token count of one text segment
    special_tokens_added: int  # what ``add_special_tokens`` adds to one sequence
    merge_inline_system: bool  # the template refuses a system message after the first

    @classmethod
    def from_model_dir(cls, directory: Path, prompt_family: str | None) -> PromptCounter | None:
        """The counter for a model directory whose architecture has ``prompt_family``
        (``sidecar.profiles.architectures``), or None when it lacks the files or placeholder."""
        image_token = None if prompt_family is None else IMAGE_PLACEHOLDERS.get(prompt_family)
        tokenizer_file = directory / "tokenizer.json"
        if image_token is None or not tokenizer_file.is_file():
            return None
        source, special = read_template(directory)
        if source is None:
            return None
        tokenizer = Tokenizer.from_file(str(tokenizer_file))
        image_token_id = tokenizer.token_to_id(image_token)
        if image_token_id is None:
            return None

        @functools.lru_cache(maxsize=SEGMENT_CACHE_SIZE)
        def segment_tokens(text: str) -> int:
            return len(tokenizer.encode(text, add_special_tokens=False).ids)

        try:
            template = compiled(source)
        except ChatTemplateError:
            return None
        return cls(
            template=template,
            tokenizer=tokenizer,
            image_token_id=image_token_id,
            image_token=image_token,
            placeholders=QWEN_PLACEHOLDERS,
            special_tokens=special,
            added_tokens=_added_token_splitter(tokenizer),
            segment_tokens=segment_tokens,
            special_tokens_added=len(tokenizer.encode("", add_special_tokens=True).ids),
            merge_inline_system=_refuses_inline_system(source),
        )

    @property
    def server_format(self) -> ContentFormat:
        """The content format of the server's own template."""
        return self.template.content_format

    def chat_prompt_tokens(
        self, request: ChatRequest, image_tokens: Sequence[int], *, add_special_tokens: bool
    ) -> int:
        """Prompt tokens of one conversation, each image expanded to its predicted count."""
        own = request.kwargs.get("chat_template")
        template = (
            compiled(request.template)
            if request.template is not None
            else compiled(own)
            if isinstance(own, str)
            else self.template
        )
        parts_format = (
            template.content_format if request.template is not None else self.server_format
        )
        messages = conversation(
            request.messages,
            parts_format,
            self.placeholders,
            developer_role=template.developer_role,
        )
        rendered = render(
            template,
            messages,
            tools=request.tools,
            kwargs=request.kwargs,
            special_tokens=self.special_tokens,
        )
        total, placeholders = self._count(rendered)
        if placeholders < len(image_tokens):
            # vLLM has more images than places for them (an image in a merged system
            # message): it fails the request; the estimate prices it meanwhile.
            raise ChatTemplateError(
                f"template rendered {placeholders} image placeholders for "
                f"{len(image_tokens)} images"
            )
        specials = self.special_tokens_added if add_special_tokens else 0
        # vLLM expands the first placeholders, one per image; any others stay one token.
        return total - len(image_tokens) + sum(image_tokens) + specials

    def text_tokens(self, text: str, *, add_special_tokens: bool) -> int:
        """Tokens of a plain prompt (``/v1/completions``)."""
        return self._count(text)[0] + (self.special_tokens_added if add_special_tokens else 0)

    def _count(self, rendered: str) -> tuple[int, int]:
        """Tokens of the rendered prompt and how many are image placeholders.

        The tokenizer cuts the text at its added tokens before anything else and tokenizes
        each stretch between them on its own, so the count is the sum over stretches. A chat
        resends its history every turn: memoising each stretch makes a turn cost about its
        new text instead of the whole conversation.
        """
        if self.added_tokens is None:
            ids = self.tokenizer.encode(rendered, add_special_tokens=False).ids
            return len(ids), ids.count(self.image_token_id)
        pieces = self.added_tokens.split(rendered)
        texts, added = pieces[0::2], pieces[1::2]
        total = len(added) + sum(self.segment_tokens(text) for text in texts if text)
        return total, added.count(self.image_token)


def _added_token_splitter(tokenizer: Tokenizer) -> re.Pattern[str] | None:
    """A pattern that cuts text where the tokenizer does, or None when that is not plain.

    Added tokens that strip neighbouring spaces or match normalised text change their
    neighbours; then the whole prompt is tokenized at once.
    """
    added = list(tokenizer.get_added_tokens_decoder().values())
    if not added or any(t.lstrip or t.rstrip or t.normalized or t.single_word for t in added):
        return None
    contents = sorted((t.content for t in added), key=len, reverse=True)
    return re.compile("(" + "|".join(re.escape(content) for content in contents) + ")")


def _refuses_inline_system(source: str) -> bool:
    """vLLM's start-up probe for ``/v1/messages``: does ``[system, user, system, user]``
    render? If not, in-message system turns are merged into the leading system text. The
    probe's environment is plain: a template that calls ``raise_exception`` fails it."""
    environment = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols]
    )
    turns = [{"role": role, "content": "t"} for role in ("system", "user", "system", "user")]
    try:
        environment.from_string(source).render(messages=turns, add_generation_prompt=False)
    except jinja2.TemplateError:
        return True
    return False


def read_template(directory: Path) -> tuple[str | None, dict[str, str]]:
    """The directory's chat template and the special tokens templates may read."""
    special: dict[str, str] = {}
    source: str | None = None
    config_path = directory / "tokenizer_config.json"
    if config_path.is_file():
        config: dict[str, Any] = json.loads(config_path.read_text(encoding="utf-8"))
        for key in ("bos_token", "eos_token", "pad_token", "unk_token"):
            value = config.get(key)
            value = value.get("content") if isinstance(value, dict) else value
            if isinstance(value, str):
                special[key] = value
        if isinstance(config.get("chat_template"), str):
            source = config["chat_template"]
    jinja_path = directory / "chat_template.jinja"
    json_path = directory / "chat_template.json"
    if jinja_path.is_file():
        source = jinja_path.read_text(encoding="utf-8")
    elif json_path.is_file():
        value = json.loads(json_path.read_text(encoding="utf-8")).get("chat_template")
        source = value if isinstance(value, str) else source
    return source, special
