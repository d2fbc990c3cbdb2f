"""One reader per body shape: where each vLLM 0.33 route keeps its prompts and media.

A reader walks the parsed body with a ``RefFinder`` (which collects images, media and text)
and returns a ``Reading``: the prompts vLLM runs on their own (``SequenceRef``), the output
limit the client asked for, and ``n``. Readers refuse, with vLLM's own message where it has
one, only what vLLM refuses too; everything vLLM accepts is read, whatever it is.

Multi-prompt shapes (a completions list, a chat batch, embeddings and score inputs) give one
sequence per prompt, so the prompt budget applies to each prompt and KV to their sum.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sidecar.errors import InvalidRequestError
from sidecar.images.refs import RefFinder, SequenceRef
from sidecar.routes import BodyShape, Work

MAX_INT64 = 2**63 - 1  # vLLM's engine carries counts as int64; more overflows our float metrics
COMPLETIONS_DEFAULT_MAX_TOKENS = 16  # vLLM's CompletionRequest default when the field is absent


@dataclass(frozen=True, slots=True)
class Reading:
    """What one body asks vLLM to run."""

    sequences: tuple[SequenceRef, ...]
    max_output_tokens: int | None  # None: the request leaves it to vLLM
    n: int = 1
    work: Work | None = None  # when the body decides it (``/invocations``), not the route


Reader = Callable[[dict[str, Any], RefFinder], Reading]


def read_chat(root: dict[str, Any], finder: RefFinder) -> Reading:
    """``/v1/chat/completions``: ``messages``, tools and documents for the template."""
    start = finder.mark()
    finder.chat_messages(_list(root, "messages"))
    finder.json_text(root.get("tools"))
    finder.json_text(root.get("documents"))
    return Reading((finder.since(start),), _chat_output_limit(root), n=_n(root))


def read_chat_batch(root: dict[str, Any], finder: RefFinder) -> Reading:
    """``/v1/chat/completions/batch``: a list of conversations, one engine request each."""
    conversations = _list(root, "messages")
    if not conversations:
        raise InvalidRequestError(
            "'messages' must hold at least one conversation", param="messages"
        )
    if _n(root) != 1:
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
    prompts = _prompts(root, "prompt", finder, required=True)
    if "max_tokens" not in root:
        limit: int | None = COMPLETIONS_DEFAULT_MAX_TOKENS
    else:
        limit = positive_int(root, "max_tokens")
    return Reading(prompts, limit, n=_n(root))


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
    return Reading((finder.since(start),), positive_int(root, "max_output_tokens"))


def read_messages(root: dict[str, Any], finder: RefFinder) -> Reading:
    """``/v1/messages`` and ``count_tokens``: Anthropic messages and ``system``."""
    start = finder.mark()
    messages = _list(root, "messages")
    if root.get("system") is not None:
        finder.anthropic_blocks(root, "system", "system")
        finder.messages += 1
    finder.count_parts(len(messages), "messages")
    finder.messages += len(messages)
    for message in messages:
        if not isinstance(message, dict):
            raise InvalidRequestError("Each message must be an object", param="messages")
        finder.anthropic_blocks(message, "content", "messages")
    finder.json_text(root.get("tools"))
    return Reading((finder.since(start),), positive_int(root, "max_tokens"))


def read_cohere_chat(root: dict[str, Any], finder: RefFinder) -> Reading:
    """``/cohere/v2/chat``: chat messages whose blocks are ``text`` and ``image_url``."""
    start = finder.mark()
    finder.chat_messages(_list(root, "messages"))
    finder.json_text(root.get("documents"))
    finder.json_text(root.get("tools"))
    return Reading((finder.since(start),), positive_int(root, "max_tokens"))


def read_tokenize(root: dict[str, Any], finder: RefFinder) -> Reading:
    """``/tokenize``: a ``prompt``, or chat ``messages`` whose media vLLM processes."""
    if "messages" in root:
        return Reading(read_chat(root, finder).sequences, None)
    return Reading(_prompts(root, "prompt", finder, required=True), None)


def read_embeddings(root: dict[str, Any], finder: RefFinder) -> Reading:
    """``/v1/embeddings``, ``/pooling``, ``/classify``: ``input`` (text, token ids, or chat
    messages, or a list of either) or ``messages`` (one conversation, or a list of them)."""
    if "data" in root and "input" not in root and "messages" not in root:
        raise InvalidRequestError(
            "pooling plugin 'data' cannot be priced by the sidecar: its shape is the plugin's",
            param="data",
        )
    key = "messages" if "messages" in root else "input"
    value = root.get(key)
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return Reading((_conversation(value, finder, key),), None)
    if isinstance(value, list) and _is_conversations(value):
        return Reading(tuple(_conversation(v, finder, key) for v in value), None)
    if key == "messages":
        raise InvalidRequestError("'messages' must be a list of messages", param="messages")
    return Reading(_prompts(root, "input", finder, required=True), None)


def read_cohere_embed(root: dict[str, Any], finder: RefFinder) -> Reading:
    """``/v2/embed``: ``texts``, ``images`` (data URIs or URLs) or ``inputs`` of parts."""
    sequences: list[SequenceRef] = []
    for key in ("texts", "images", "inputs"):
        items = root.get(key)
        if items is None:
            continue
        if not isinstance(items, list):
            raise InvalidRequestError(f"'{key}' must be a list", param=key)
        finder.count_parts(len(items), key)
        for i, item in enumerate(items):
            start = finder.mark()
            if key == "texts":
                finder.text(items, i, key)
            elif key == "images":
                finder.media_value(items, i, "image", key)
            elif isinstance(item, dict):
                finder.content(item, key)
            else:
                raise InvalidRequestError("Each input must be an object with 'content'", param=key)
            sequences.append(finder.since(start))
    if not sequences:
        raise InvalidRequestError("One of 'texts', 'images' or 'inputs' is required", param="texts")
    return Reading(tuple(sequences), None)


# vLLM's ScoreRequest forms: (query side, document side).
_SCORE_SIDES = (("queries", "documents"), ("queries", "items"), ("data_1", "data_2"),
                ("text_1", "text_2"))  # fmt: skip


def read_score(root: dict[str, Any], finder: RefFinder) -> Reading:
    """``/score``: each query scored with each document; a pair is one prompt."""
    for query_key, document_key in _SCORE_SIDES:
        if query_key in root and document_key in root:
            queries = _score_inputs(root, query_key, finder)
            documents = _score_inputs(root, document_key, finder)
            return Reading(_pairs(queries, documents), None)
    raise InvalidRequestError(
        "A score request needs queries and documents (or items, data_1/data_2, text_1/text_2)",
        param="queries",
    )


def read_rerank(root: dict[str, Any], finder: RefFinder) -> Reading:
    """``/rerank``: one ``query`` with every document."""
    if "query" not in root or "documents" not in root:
        raise InvalidRequestError("A rerank request needs 'query' and 'documents'", param="query")
    query = _score_inputs(root, "query", finder)
    return Reading(_pairs(query, _score_inputs(root, "documents", finder)), None)


def read_generative_scoring(root: dict[str, Any], finder: RefFinder) -> Reading:
    """``/generative_scoring``: one engine request per item, the query before it, one token."""
    query = _prompts(root, "query", finder, required=True)
    items = _prompts(root, "items", finder, required=True)
    return Reading(_pairs(query, items), 1)


def read_generate(root: dict[str, Any], finder: RefFinder) -> Reading:
    """``/inference/v1/generate``: rendered token ids, and media vLLM fetches itself."""
    token_ids = root.get("token_ids")
    if not isinstance(token_ids, list) or not token_ids:
        raise InvalidRequestError("'token_ids' must be a non-empty list", param="token_ids")
    finder.count_parts(len(token_ids), "token_ids")
    start = finder.mark()
    parts = root.get("content_parts")
    if isinstance(parts, list):
        finder.count_parts(len(parts), "content_parts")
        for part in parts:
            if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                raise InvalidRequestError("Each content part needs a 'type'", param="content_parts")
            modality = part["type"].removesuffix("_url")
            if modality not in ("image", "video", "audio"):
                raise InvalidRequestError(
                    f"Unsupported content part type: {part['type']!r}", param="content_parts"
                )
            finder.media_value(part, "url", modality, "content_parts")
    elif parts is not None:
        raise InvalidRequestError("'content_parts' must be a list", param="content_parts")
    sampling = root.get("sampling_params") or {}
    if not isinstance(sampling, dict):
        raise InvalidRequestError("'sampling_params' must be an object", param="sampling_params")
    # The ids already hold every placeholder position the media expand to.
    sequence = finder.since(start, token_ids=len(token_ids))
    return Reading((sequence,), positive_int(sampling, "max_tokens"), n=_n(sampling))


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


def read_invocations(root: dict[str, Any], finder: RefFinder) -> Reading:
    """``/invocations``: SageMaker's route, read as the handler vLLM would pick for the shape:
    chat when there are ``messages``, completions for a ``prompt``, then the pooling shapes."""
    if "messages" in root and not ("input" in root and _is_pooling(root)):
        return read_chat(root, finder)
    if "prompt" in root or "prompt_embeds" in root:
        return read_completions(root, finder)
    if "query" in root and "documents" in root:
        reading = read_rerank(root, finder)
    elif any(query in root for query, _ in _SCORE_SIDES):
        reading = read_score(root, finder)
    elif "input" in root or "data" in root:
        reading = read_embeddings(root, finder)
    else:
        raise InvalidRequestError(
            "Cannot find suitable handler for request: it has no 'messages', 'prompt', "
            "'input', 'query' or 'queries'",
            param=None,
        )
    return Reading(reading.sequences, None, work=Work.POOL)


READERS: dict[BodyShape, Reader] = {
    BodyShape.CHAT: read_chat,
    BodyShape.CHAT_BATCH: read_chat_batch,
    BodyShape.COMPLETIONS: read_completions,
    BodyShape.RESPONSES: read_responses,
    BodyShape.MESSAGES: read_messages,
    BodyShape.COHERE_CHAT: read_cohere_chat,
    BodyShape.TOKENIZE: read_tokenize,
    BodyShape.EMBEDDINGS: read_embeddings,
    BodyShape.COHERE_EMBED: read_cohere_embed,
    BodyShape.POOLING: read_embeddings,
    BodyShape.SCORE: read_score,
    BodyShape.RERANK: read_rerank,
    BodyShape.GENERATIVE_SCORING: read_generative_scoring,
    BodyShape.GENERATE: read_generate,
    BodyShape.INVOCATIONS: read_invocations,
    BodyShape.STRUCTURED_DECISION: read_structured_decision,
    BodyShape.DECISIONS: read_decisions,
}


def positive_int(root: dict[str, Any], key: str) -> int | None:
    """An integer field that must be at least 1 when present (an integral float is one)."""
    value = root.get(key)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if value is not None and not _is_int(value):
        raise InvalidRequestError(f"'{key}' must be an integer", param=key)
    if value is not None and value < 1:
        raise InvalidRequestError(f"{key} must be at least 1, got {value}.", param=key)
    if value is not None and value > MAX_INT64:
        raise InvalidRequestError(f"{key} must be at most {MAX_INT64}.", param=key)
    return value


def _chat_output_limit(root: dict[str, Any]) -> int | None:
    limit = positive_int(root, "max_completion_tokens")
    return limit if limit is not None else positive_int(root, "max_tokens")


def _n(root: dict[str, Any]) -> int:
    return positive_int(root, "n") or 1


def _list(root: dict[str, Any], key: str) -> list[Any]:
    value = root.get(key)
    if not isinstance(value, list):
        raise InvalidRequestError(f"'{key}' must be a list", param=key)
    return value


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_conversations(value: Any) -> bool:
    """A non-empty list of non-empty lists of messages."""
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(v, list) and v and all(isinstance(m, dict) for m in v) for v in value)
    )


def _is_pooling(root: dict[str, Any]) -> bool:
    return isinstance(root.get("input"), str | list)


def _conversation(messages: list[Any], finder: RefFinder, param: str) -> SequenceRef:
    start = finder.mark()
    finder.chat_messages(messages, param)
    return finder.since(start)


def _prompts(
    root: dict[str, Any], key: str, finder: RefFinder, *, required: bool
) -> tuple[SequenceRef, ...]:
    """A prompt field: text, token ids, or a list of either; one sequence per prompt."""
    value = root.get(key)
    if isinstance(value, str):
        start = finder.mark()
        finder.text(root, key, key)
        return (finder.since(start),)
    if isinstance(value, list) and value and all(_is_int(v) for v in value):
        finder.count_parts(len(value), key)
        return (SequenceRef(token_ids=len(value)),)
    if isinstance(value, list) and value:
        finder.count_parts(len(value), key)
        sequences = []
        for i, each in enumerate(value):
            start = finder.mark()
            if isinstance(each, list) and all(_is_int(v) for v in each):
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


def _score_inputs(root: dict[str, Any], key: str, finder: RefFinder) -> tuple[SequenceRef, ...]:
    """A score side: text, ``{"content": [parts]}``, or a list of either."""
    value = root.get(key)
    items = value if isinstance(value, list) else [value]
    holder = value if isinstance(value, list) else [value]
    finder.count_parts(len(items), key)
    sequences = []
    for i, item in enumerate(items):
        start = finder.mark()
        if isinstance(item, str):
            finder.text(holder, i, key)
        elif isinstance(item, dict) and isinstance(item.get("content"), list):
            finder.content(item, key)
        else:
            raise InvalidRequestError(
                f"Each {key} must be a string or an object with a 'content' list", param=key
            )
        sequences.append(finder.since(start))
    if not sequences:
        raise InvalidRequestError(f"'{key}' must not be empty", param=key)
    return tuple(sequences)


def _pairs(
    queries: tuple[SequenceRef, ...], documents: tuple[SequenceRef, ...]
) -> tuple[SequenceRef, ...]:
    """The prompts vLLM scores: one query with each document, or query i with document i."""
    if len(queries) == 1:
        return tuple(queries[0] + document for document in documents)
    if len(queries) != len(documents):
        raise InvalidRequestError(
            f"{len(queries)} queries cannot be paired with {len(documents)} documents",
            param="queries",
        )
    return tuple(query + document for query, document in zip(queries, documents, strict=True))
