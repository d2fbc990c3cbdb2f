"""The chat family's body shapes: where each route keeps its prompts and media.

A reader walks the parsed body with a ``RefFinder`` (which collects images, media and text)
and returns a ``Reading``: the prompts vLLM runs on their own (``SequenceRef``), the output
limit the client asked for, and ``n``. Readers refuse, with vLLM's own message where it has
one, only what vLLM refuses too; everything vLLM accepts is read, whatever it is.

Multi-prompt shapes (a completions list, a chat batch, embeddings and score inputs) give one
sequence per prompt, so the prompt budget applies to each prompt and KV to their sum. The
pooling, scoring and token-id shapes are ``pool_shapes``'; ``request_body`` maps every
``BodyShape`` to its reader.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sidecar.body.lax_values import is_int_list, is_token_ids, lax_int
from sidecar.body.refs import RefFinder, SequenceRef
from sidecar.errors import InvalidRequestError
from sidecar.routes import Work

MAX_INT64 = 2**63 - 1  # vLLM's engine carries counts as int64; more overflows our float metrics
COMPLETIONS_DEFAULT_MAX_TOKENS = 16  # vLLM's CompletionRequest default when the field is absent


@dataclass(frozen=True, slots=True)
class Reading:
    """What one body asks vLLM to run."""

    sequences: tuple[SequenceRef, ...]
    max_output_tokens: int | None  # None: the request leaves it to vLLM
    n: int = 1
    work: Work | None = None  # when the body decides it (``/invocations``), not the route
    # vLLM's ``truncate_prompt_tokens``: each prompt keeps at most this many tokens (-1: as
    # many as the context allows); None: not truncated.
    truncate_prompt_tokens: int | None = None


Reader = Callable[[dict[str, Any], RefFinder], Reading]


def read_chat(root: dict[str, Any], finder: RefFinder) -> Reading:
    """``/v1/chat/completions``: ``messages``, tools and documents for the template."""
    start = finder.mark()
    finder.chat_messages(required_list(root, "messages"))
    finder.json_text(root.get("tools"))
    finder.json_text(root.get("documents"))
    return Reading(
        (finder.since(start),),
        _chat_output_limit(root),
        n=count_n(root),
        truncate_prompt_tokens=truncation(root),
    )


def read_chat_batch(root: dict[str, Any], finder: RefFinder) -> Reading:
    """``/v1/chat/completions/batch``: a list of conversations, one engine request each."""
    conversations = required_list(root, "messages")
    if not conversations:
        raise InvalidRequestError(
            "'messages' must hold at least one conversation", param="messages"
        )
    if count_n(root) != 1:
        raise InvalidRequestError("n must be 1 for batch chat completions", param="n")
    sequences = []
    for conversation in conversations:
        if not isinstance(conversation, list) or not conversation:
            raise InvalidRequestError(
                "Each conversation must be a non-empty list of messages", param="messages"
            )
        start = finder.mark()
        finder.chat_messages(conversation)
        sequences.append(finder.since(start))
    return Reading(tuple(sequences), _chat_output_limit(root))


def read_completions(root: dict[str, Any], finder: RefFinder) -> Reading:
    """``/v1/completions``: a prompt as text or token ids, or a list of either."""
    sequences = read_prompts(root, "prompt", finder, required=True)
    if "max_tokens" not in root:
        limit: int | None = COMPLETIONS_DEFAULT_MAX_TOKENS
    else:
        limit = positive_int(root, "max_tokens")
    return Reading(sequences, limit, n=count_n(root), truncate_prompt_tokens=truncation(root))


def read_responses(root: dict[str, Any], finder: RefFinder) -> Reading:
    """``/v1/responses``: ``input`` text or items, and ``instructions``."""
    start = finder.mark()
    value = root.get("input")
    if isinstance(value, list):
        finder.responses_input(value)
    elif isinstance(value, str):
        finder.text(root, "input", "input")
        finder.messages += 1
    else:
        raise InvalidRequestError("'input' must be a string or a list of items", param="input")
    if root.get("instructions") is not None:
        finder.text(root, "instructions", "instructions")
        finder.messages += 1
    finder.json_text(root.get("tools"))
    # vLLM truncates to the context unless ``truncation`` is absent or "disabled".
    keep = None if root.get("truncation", "disabled") == "disabled" else -1
    return Reading(
        (finder.since(start),),
        positive_int(root, "max_output_tokens"),
        truncate_prompt_tokens=keep,
    )


def read_messages(root: dict[str, Any], finder: RefFinder) -> Reading:
    """``/v1/messages`` and ``count_tokens``: Anthropic messages and ``system``."""
    start = finder.mark()
    messages = required_list(root, "messages")
    if root.get("system") is not None:
        finder.anthropic_blocks(root, "system", "system", role="system")
        finder.messages += 1
    finder.count_parts(len(messages), "messages")
    finder.messages += len(messages)
    for message in messages:
        if not isinstance(message, dict):
            raise InvalidRequestError("Each message must be an object", param="messages")
        finder.anthropic_blocks(message, "content", "messages", role=message.get("role"))
    finder.json_text(root.get("tools"))
    return Reading((finder.since(start),), positive_int(root, "max_tokens"))


def read_cohere_chat(root: dict[str, Any], finder: RefFinder) -> Reading:
    """``/cohere/v2/chat``: chat messages whose blocks are ``text`` and ``image_url``."""
    start = finder.mark()
    finder.chat_messages(required_list(root, "messages"))
    finder.json_text(root.get("documents"))
    finder.json_text(root.get("tools"))
    return Reading((finder.since(start),), positive_int(root, "max_tokens"))


def read_tokenize(root: dict[str, Any], finder: RefFinder) -> Reading:
    """``/tokenize``: a ``prompt``, or chat ``messages`` whose media vLLM processes."""
    if "messages" in root:
        return Reading(read_chat(root, finder).sequences, None)
    return Reading(read_prompts(root, "prompt", finder, required=True), None)


def read_structured_decision(root: dict[str, Any], finder: RefFinder) -> Reading:
    """``/v1/systemone``: state, questions, instructions, and lists of media URLs."""
    start = finder.mark()
    for key in ("state", "instructions"):
        if isinstance(root.get(key), str):
            finder.text(root, key, key)
        else:
            finder.json_text(root.get(key))
    finder.json_text(root.get("questions"))
    for key, modality in (("images", "image"), ("videos", "video"), ("audio", "audio")):
        urls = root.get(key)
        if urls is None:
            continue
        if not isinstance(urls, list):
            raise InvalidRequestError(f"'{key}' must be a list of URLs", param=key)
        finder.count_parts(len(urls), key)
        for i in range(len(urls)):
            finder.media_value(urls, i, modality, key)
    finder.messages += 1
    return Reading((finder.since(start),), None)


def read_decisions(root: dict[str, Any], finder: RefFinder) -> Reading:
    """``/v1/decisions``: text input (a string or user messages) and questions."""
    start = finder.mark()
    value = root.get("input")
    if isinstance(value, list):
        finder.chat_messages(value, "input")
        if finder.images or finder.media:
            raise InvalidRequestError("Images are not supported by decisions", param="input")
    else:
        finder.text(root, "input", "input")
        finder.messages += 1
    finder.json_text(root.get("questions"))
    return Reading((finder.since(start),), None)


def positive_int(root: dict[str, Any], key: str) -> int | None:
    """An integer field that must be at least 1 when present (an integral float is one)."""
    raw = root.get(key)
    if raw is None:
        return None
    value = lax_int(raw)
    if value is None:
        raise InvalidRequestError(f"'{key}' must be an integer", param=key)
    if value < 1:
        raise InvalidRequestError(f"{key} must be at least 1, got {value}.", param=key)
    if value > MAX_INT64:
        raise InvalidRequestError(f"{key} must be at most {MAX_INT64}.", param=key)
    return value


def truncation(root: dict[str, Any]) -> int | None:
    """``truncate_prompt_tokens`` as vLLM reads it; None where absent or out of range, which
    vLLM refuses: the prompt is priced whole."""
    value = lax_int(root.get("truncate_prompt_tokens"))
    return value if value is not None and -1 <= value <= MAX_INT64 else None


def _chat_output_limit(root: dict[str, Any]) -> int | None:
    limit = positive_int(root, "max_completion_tokens")
    return limit if limit is not None else positive_int(root, "max_tokens")


def count_n(root: dict[str, Any]) -> int:
    return positive_int(root, "n") or 1


def required_list(root: dict[str, Any], key: str) -> list[Any]:
    value = root.get(key)
    if not isinstance(value, list):
        raise InvalidRequestError(f"'{key}' must be a list", param=key)
    return value


def read_prompts(
    root: dict[str, Any], key: str, finder: RefFinder, *, required: bool
) -> tuple[SequenceRef, ...]:
    """A prompt field: text, token ids, or a list of either; one sequence per prompt."""
    value = root.get(key)
    if isinstance(value, str):
        start = finder.mark()
        finder.text(root, key, key)
        return (finder.since(start),)
    if isinstance(value, list) and value and is_token_ids(value):
        finder.count_parts(len(value), key)
        return (SequenceRef(token_ids=len(value)),)
    if isinstance(value, list) and value:
        finder.count_parts(len(value), key)
        sequences = []
        for i, each in enumerate(value):
            start = finder.mark()
            if isinstance(each, list) and is_int_list(each):  # the list[list[int]] member
                finder.count_parts(len(each), key)
                sequences.append(SequenceRef(token_ids=len(each)))
            elif isinstance(each, str):
                finder.text(value, i, key)
                sequences.append(finder.since(start))
            else:
                raise InvalidRequestError(f"Each {key} must be a string or token ids", param=key)
        return tuple(sequences)
    if value is None and not required:
        return ()
    if value is None or value == []:
        if key == "prompt" and root.get("prompt_embeds") is not None:
            raise InvalidRequestError(
                "You must set `--enable-prompt-embeds` to input `prompt_embeds`",
                param="prompt_embeds",
            )
        raise InvalidRequestError(
            f"Either {key} or {key}_embeds must be provided and non-empty.", param=key
        )
    raise InvalidRequestError(f"'{key}' must be a string or a list", param=key)
