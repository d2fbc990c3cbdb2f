"""Exact prompt tokens for each route whose body the model's own template renders.

``exact_prompts`` dispatches on the body's shape: ``/v1/completions`` prompts go to the
tokenizer alone, and chat, Responses and Anthropic bodies become a ``ChatRequest`` rendered
by the template; ``/generative_scoring`` pairs are the query and each item tokenized. Each
prompt holds its images' predicted counts and their wrappers; a video's
placeholder is left out, since the video's own price (wrappers included) takes its place.
Anything the counter cannot render exactly raises ``ChatTemplateError``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sidecar.body.lax_values import is_token_ids, lax_bool
from sidecar.body.request_body import RequestBody
from sidecar.routes import BodyShape
from sidecar.text.chat_request import ChatRequest, from_chat_body
from sidecar.text.conversation import ChatTemplateError
from sidecar.text.messages_input import from_messages_body
from sidecar.text.responses_input import from_responses_body
from sidecar.text.text_tokens import PromptCounter
from sidecar.video.qwen import QWEN_VIDEO_PLACEHOLDER_TOKENS


def exact_prompts(
    counter: PromptCounter, parsed: RequestBody, image_tokens: Sequence[int]
) -> list[int]:
    """Each sequence's prompt tokens (token ids sent as ids not included); ``image_tokens``
    are the images' predicted counts, by image index."""
    shape, root = parsed.route.shape, parsed.skeleton
    if shape is BodyShape.TOKENIZE and "messages" not in root:
        shape = BodyShape.COMPLETIONS  # /tokenize's prompt form is a completions prompt
    if shape is BodyShape.CHAT_BATCH:
        return _batch_prompts(counter, parsed, image_tokens)
    if shape is BodyShape.GENERATIVE_SCORING:
        return _scoring_prompts(counter, root, len(parsed.sequences))
    if shape is BodyShape.COMPLETIONS:
        add_special = lax_bool(root.get("add_special_tokens"), True)
        texts = _completion_texts(root.get("prompt"))
        if len(texts) != len(parsed.sequences):
            raise ChatTemplateError("prompts and sequences disagree")
        return [
            0 if text is None else counter.text_tokens(text, add_special_tokens=add_special)
            for text in texts
        ]
    request: ChatRequest
    if shape in (BodyShape.CHAT, BodyShape.TOKENIZE):
        request = from_chat_body(root)
    elif shape is BodyShape.RESPONSES:
        request = from_responses_body(root)
    elif shape is BodyShape.MESSAGES:
        request = from_messages_body(root, merge_inline_system=counter.merge_inline_system)
    else:
        raise ChatTemplateError(f"{shape.value} bodies are estimated")
    if len(parsed.sequences) != 1:
        raise ChatTemplateError("one conversation expected")
    # Chat and /tokenize's chat form both default to add_special_tokens false.
    add_special = shape is not BodyShape.MESSAGES and lax_bool(
        root.get("add_special_tokens"), False
    )
    prompt = counter.chat_prompt_tokens(request, image_tokens, add_special_tokens=add_special)
    videos = sum(1 for item in parsed.media if item.kind == "video")
    return [prompt - QWEN_VIDEO_PLACEHOLDER_TOKENS * videos]


def _batch_prompts(
    counter: PromptCounter, parsed: RequestBody, image_tokens: Sequence[int]
) -> list[int]:
    """``/v1/chat/completions/batch``: each conversation rendered as its own chat, with the
    batch's shared fields and no tools (vLLM renders a batch without them)."""
    root = parsed.skeleton
    conversations = root.get("messages")
    if not isinstance(conversations, list) or len(conversations) != len(parsed.sequences):
        raise ChatTemplateError("conversations and sequences disagree")
    if any(item.kind == "video" for item in parsed.media):
        raise ChatTemplateError("a batch with videos is estimated")
    add_special = lax_bool(root.get("add_special_tokens"), False)
    prompts = []
    for messages, sequence in zip(conversations, parsed.sequences, strict=True):
        request = from_chat_body({**root, "messages": messages, "tools": None})
        own_images = [image_tokens[i] for i in sequence.images]
        prompts.append(
            counter.chat_prompt_tokens(request, own_images, add_special_tokens=add_special)
        )
    return prompts


def _scoring_prompts(counter: PromptCounter, root: Mapping[str, Any], sequences: int) -> list[int]:
    """``/generative_scoring``: vLLM encodes the query with the request's
    ``add_special_tokens`` (default true) and each item without, and runs query and item
    together as one prompt per item."""
    query, items = root.get("query"), root.get("items")
    add_special = lax_bool(root.get("add_special_tokens"), True)
    query_tokens = (
        counter.text_tokens(query, add_special_tokens=add_special) if isinstance(query, str) else 0
    )
    if isinstance(items, list) and items and is_token_ids(items):
        items = [items]  # one item sent as token ids
    if not isinstance(items, list) or len(items) != sequences:
        raise ChatTemplateError("items and sequences disagree")
    return [
        query_tokens
        + (counter.text_tokens(item, add_special_tokens=False) if isinstance(item, str) else 0)
        for item in items
    ]


def _completion_texts(prompt: Any) -> list[str | None]:
    """The text of each prompt, in the order of ``parsed.sequences`` (None: token ids)."""
    if isinstance(prompt, str):
        return [prompt]
    if isinstance(prompt, list) and prompt and is_token_ids(prompt):
        return [None]
    if isinstance(prompt, list):
        return [p if isinstance(p, str) else None for p in prompt]
    raise ChatTemplateError("no prompt")
