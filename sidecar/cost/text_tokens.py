"""Exact prompt tokens for chat requests: the model's own chat template and tokenizer.

When the model directory holds ``tokenizer.json`` and a chat template
(``chat_template.jinja``, ``chat_template.json`` or ``tokenizer_config.json``), the
sidecar renders each chat request as vLLM does (transformers' sandboxed Jinja
environment, ``add_generation_prompt`` true, no special tokens added by the tokenizer),
tokenizes it, and replaces each image placeholder token by the image's predicted count.

Templates that iterate over content parts get OpenAI-style parts (``{"type": "image"}``),
as vLLM's "openai" content format does; other templates get vLLM's "string" format, the
image placeholders before the text. Families without a known placeholder keep the
character estimate; README's model table says which.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment
from tokenizers import Tokenizer

from sidecar.vision import ImageTokens

SEGMENT_CACHE_SIZE = 16_384  # distinct text stretches remembered; each is a few hundred bytes

# model_type -> (placeholder token in the rendered prompt, vLLM's string-format placeholder)
IMAGE_PLACEHOLDERS = {
    "qwen2_vl": ("<|image_pad|>", "<|vision_start|><|image_pad|><|vision_end|>"),
    "qwen2_5_vl": ("<|image_pad|>", "<|vision_start|><|image_pad|><|vision_end|>"),
    "qwen3_vl": ("<|image_pad|>", "<|vision_start|><|image_pad|><|vision_end|>"),
}
_IMAGE_PART_TYPES = {"image_url", "input_image", "image_pil", "image_embeds", "image"}
_PARTS_LOOP = re.compile(r"for\s+\w+\s+in\s+(message|m|msg)(\[['\"]content['\"]\]|\.content)")


class ChatTemplateError(Exception):
    """The template could not render this request; the estimate is used instead."""


@dataclass(frozen=True, slots=True)
class PromptCounter:
    """A compiled chat template plus tokenizer, built once per process."""

    template: jinja2.Template
    tokenizer: Tokenizer
    image_token_id: int
    image_token: str
    string_placeholder: str
    openai_parts: bool
    special_tokens: Mapping[str, str]
    added_tokens: re.Pattern[str] | None  # splits a prompt where the tokenizer splits it
    segment_tokens: Callable[[str], int]  # memoised token count of one text segment

    @classmethod
    def from_model_dir(cls, directory: Path, model_type: str) -> PromptCounter | None:
        """The counter for a model directory, or None when it lacks the files or placeholder."""
        placeholders = IMAGE_PLACEHOLDERS.get(model_type)
        tokenizer_file = directory / "tokenizer.json"
        if placeholders is None or not tokenizer_file.is_file():
            return None
        source, special = _read_template(directory)
        if source is None:
            return None
        tokenizer = Tokenizer.from_file(str(tokenizer_file))
        image_token_id = tokenizer.token_to_id(placeholders[0])
        if image_token_id is None:
            return None

        @functools.lru_cache(maxsize=SEGMENT_CACHE_SIZE)
        def segment_tokens(text: str) -> int:
            return len(tokenizer.encode(text, add_special_tokens=False).ids)

        return cls(
            template=_environment().from_string(source),
            tokenizer=tokenizer,
            image_token_id=image_token_id,
            image_token=placeholders[0],
            string_placeholder=placeholders[1],
            openai_parts=_PARTS_LOOP.search(source) is not None,
            special_tokens=special,
            added_tokens=_added_token_splitter(tokenizer),
            segment_tokens=segment_tokens,
        )

    def chat_prompt_tokens(self, skeleton: Mapping[str, Any], images: Sequence[ImageTokens]) -> int:
        """Prompt tokens of a chat request, images expanded to their predicted counts."""
        messages = skeleton.get("messages")
        if not isinstance(messages, list):
            raise ChatTemplateError("no messages")
        kwargs = skeleton.get("chat_template_kwargs")
        context: dict[str, Any] = {
            **self.special_tokens,
            **(kwargs if isinstance(kwargs, dict) else {}),
            "messages": [self._message(m) for m in messages],
            "add_generation_prompt": skeleton.get("add_generation_prompt", True) is not False,
        }
        if skeleton.get("tools"):
            context["tools"] = skeleton["tools"]
        try:
            rendered = self.template.render(**context)
        except Exception as exc:  # a template meets shapes it never expected: estimate instead
            raise ChatTemplateError(f"{type(exc).__name__}: {exc}") from exc
        total, placeholders = self._count(rendered)
        if placeholders != len(images):
            raise ChatTemplateError(
                f"template rendered {placeholders} image placeholders for {len(images)} images"
            )
        return total - placeholders + sum(image.tokens for image in images)

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

    def _message(self, message: Any) -> Any:
        if not isinstance(message, dict) or not isinstance(message.get("content"), list):
            return message
        parts = [_template_part(p) for p in message["content"]]
        if self.openai_parts:
            return {**message, "content": [p for p in parts if p is not None]}
        images = [self.string_placeholder for p in parts if p == {"type": "image"}]
        texts = [p["text"] for p in parts if p is not None and p.get("type") == "text"]
        return {**message, "content": "\n".join([*images, *texts])}


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


def _template_part(part: Any) -> dict[str, Any] | None:
    if not isinstance(part, dict):
        return None
    kind = part.get("type") or next((k for k in part if k in _IMAGE_PART_TYPES), None)
    if kind in _IMAGE_PART_TYPES:
        return {"type": "image"}
    if kind in ("video_url", "video_embeds"):
        return {"type": "video"}
    if kind in ("audio_url", "input_audio", "audio_embeds"):
        return {"type": "audio"}
    if kind in ("text", "input_text", "output_text"):
        return {"type": "text", "text": part.get("text", "")}
    return None


def _read_template(directory: Path) -> tuple[str | None, dict[str, str]]:
    special: dict[str, str] = {}
    source: str | None = None
    config_path = directory / "tokenizer_config.json"
    if config_path.is_file():
        config = json.loads(config_path.read_text(encoding="utf-8"))
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


def _environment() -> ImmutableSandboxedEnvironment:
    """The sandboxed environment transformers renders chat templates in."""
    environment = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"]
    )

    def tojson(
        value: Any,
        ensure_ascii: bool = False,
        indent: int | None = None,
        separators: tuple[str, str] | None = None,
        sort_keys: bool = False,
    ) -> str:
        return json.dumps(
            value, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
            sort_keys=sort_keys,
        )  # fmt: skip

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def strftime_now(date_format: str) -> str:
        # Templates print "today" in the server's local time, as transformers does.
        return datetime.now().strftime(date_format)

    environment.filters["tojson"] = tojson
    environment.globals["raise_exception"] = raise_exception
    environment.globals["strftime_now"] = strftime_now
    return environment
