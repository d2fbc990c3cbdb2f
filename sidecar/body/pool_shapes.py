"""The pooling, scoring and token-id body shapes, and ``/invocations``' dispatch among them.

Embeddings, pooling and classification take text, token ids or chat messages (with media);
score and rerank pair a query with each document, one prompt per pair; ``/inference/v1/generate``
sends rendered token ids and lets vLLM fetch the media; ``/invocations`` is read as the handler
vLLM would pick for the body's shape.
"""

from __future__ import annotations

from typing import Any

from sidecar.body.lax_values import is_int_list
from sidecar.body.refs import RefFinder, SequenceRef
from sidecar.body.shapes import (
    Reading,
    count_n,
    positive_int,
    read_chat,
    read_completions,
    read_prompts,
)
from sidecar.errors import InvalidRequestError
from sidecar.routes import Work


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
    return Reading(read_prompts(root, "input", finder, required=True), None)


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
    value = root.get("query")
    if isinstance(value, list):  # vLLM's query is ``str | list[int]``: any list is token ids
        if not is_int_list(value):
            raise InvalidRequestError("'query' must be a string or token ids", param="query")
        finder.count_parts(len(value), "query")
        query: tuple[SequenceRef, ...] = (SequenceRef(token_ids=len(value)),)
    else:
        query = read_prompts(root, "query", finder, required=True)
    items = read_prompts(root, "items", finder, required=True)
    return Reading(_pairs(query, items), 1)


_CONTENT_PART_TYPES = ("image_url", "video_url", "audio_url")


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
            if not isinstance(part, dict):
                raise InvalidRequestError(
                    "Each content part must be an object", param="content_parts"
                )
            # vLLM fetches the URL of these three types and skips any other part, typed or not.
            kind = part.get("type")
            if kind in _CONTENT_PART_TYPES:
                finder.media_value(part, "url", kind.removesuffix("_url"), "content_parts")
    elif parts is not None:
        raise InvalidRequestError("'content_parts' must be a list", param="content_parts")
    sampling = root.get("sampling_params") or {}
    if not isinstance(sampling, dict):
        raise InvalidRequestError("'sampling_params' must be an object", param="sampling_params")
    # The ids already hold every placeholder position the media expand to.
    sequence = finder.since(start, token_ids=len(token_ids))
    return Reading((sequence,), positive_int(sampling, "max_tokens"), n=count_n(sampling))


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
