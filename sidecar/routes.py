"""Every route vLLM 0.33's API server serves, and what the sidecar does with each.

One table that the router, the request parser, the metrics' ``route`` label, the error
answers, the docs and the tests all read, so no list of routes is written twice. It was taken
from vLLM 0.33.0's routers (``vllm/entrypoints``), flags and developer mode included:

* ``Route``: an inspected POST route. Its body is priced (``BodyShape`` says how to read it;
  ``Work`` says whether vLLM holds KV for it) before anything is forwarded.
* ``PASSED``: read-only and health routes, forwarded unchanged (any method).
* ``ADMIN``: routes that change the server's state or disclose its configuration. Refused
  unless ``SIDECAR_ADMIN_ROUTES=pass``.

A POST (or PUT, PATCH, DELETE) to a path in none of them follows
``SIDECAR_UNKNOWN_ROUTES``; GET, HEAD and OPTIONS elsewhere are forwarded, since vLLM serves
nothing that works on them. Paths are matched as vLLM's server matches them (``match_path``):
case-sensitive, one ``{param}`` per segment.
"""

from __future__ import annotations

import re
from enum import Enum, StrEnum


class ApiShape(StrEnum):
    """Whose wire format a route speaks: it decides the shape of error bodies and streams."""

    OPENAI = "openai"
    ANTHROPIC = "anthropic"
    COHERE = "cohere"


class BodyShape(StrEnum):
    """How a route's body carries its prompts and media."""

    CHAT = "chat"  # messages (OpenAI parts)
    CHAT_BATCH = "chat_batch"  # messages: a list of conversations
    COMPLETIONS = "completions"  # prompt: text, token ids, or a list of either
    RESPONSES = "responses"  # input: text or items; instructions
    MESSAGES = "messages"  # Anthropic messages and system
    COHERE_CHAT = "cohere_chat"  # Cohere v2 messages, documents
    TOKENIZE = "tokenize"  # prompt, or messages
    EMBEDDINGS = "embeddings"  # input (text, ids or chat messages) or messages
    COHERE_EMBED = "cohere_embed"  # texts, images or inputs
    POOLING = "pooling"  # input or messages; plugin data
    SCORE = "score"  # queries/documents, items, data_1/data_2, text_1/text_2
    RERANK = "rerank"  # query and documents
    GENERATIVE_SCORING = "generative_scoring"  # query and items, one sequence per item
    GENERATE = "generate"  # token_ids, sampling_params, content_parts
    INVOCATIONS = "invocations"  # SageMaker: dispatched by the body's shape
    STRUCTURED_DECISION = "structured_decision"  # state, questions, media URL lists
    DECISIONS = "decisions"  # input text, questions
    AUDIO = "audio"  # multipart form with one audio file


class Work(StrEnum):
    """What vLLM does with an inspected request."""

    GENERATE = "generate"  # prompt and output tokens held in KV
    POOL = "pool"  # the prompt runs once; no output tokens
    RENDER = "render"  # rendered (media fetched and processed) but never run: no KV


class Route(Enum):
    """An inspected POST route: ``(path, metric label, API shape, body shape, work)``."""

    CHAT = (
        "/v1/chat/completions",
        "chat_completions",
        ApiShape.OPENAI,
        BodyShape.CHAT,
        Work.GENERATE,
    )
    CHAT_BATCH = (
        "/v1/chat/completions/batch",
        "chat_completions_batch",
        ApiShape.OPENAI,
        BodyShape.CHAT_BATCH,
        Work.GENERATE,
    )
    COMPLETIONS = (
        "/v1/completions",
        "completions",
        ApiShape.OPENAI,
        BodyShape.COMPLETIONS,
        Work.GENERATE,
    )
    RESPONSES = ("/v1/responses", "responses", ApiShape.OPENAI, BodyShape.RESPONSES, Work.GENERATE)
    MESSAGES = ("/v1/messages", "messages", ApiShape.ANTHROPIC, BodyShape.MESSAGES, Work.GENERATE)
    MESSAGES_COUNT_TOKENS = (
        "/v1/messages/count_tokens",
        "messages_count_tokens",
        ApiShape.ANTHROPIC,
        BodyShape.MESSAGES,
        Work.RENDER,
    )
    COHERE_CHAT = (
        "/cohere/v2/chat",
        "cohere_chat",
        ApiShape.COHERE,
        BodyShape.COHERE_CHAT,
        Work.GENERATE,
    )
    GENERATE = (
        "/inference/v1/generate",
        "generate",
        ApiShape.OPENAI,
        BodyShape.GENERATE,
        Work.GENERATE,
    )
    GENERATIVE_SCORING = (
        "/generative_scoring",
        "generative_scoring",
        ApiShape.OPENAI,
        BodyShape.GENERATIVE_SCORING,
        Work.GENERATE,
    )
    INVOCATIONS = (
        "/invocations",
        "invocations",
        ApiShape.OPENAI,
        BodyShape.INVOCATIONS,
        Work.GENERATE,
    )
    STRUCTURED_DECISION = (
        "/v1/systemone",
        "systemone",
        ApiShape.OPENAI,
        BodyShape.STRUCTURED_DECISION,
        Work.GENERATE,
    )
    DECISIONS = ("/v1/decisions", "decisions", ApiShape.OPENAI, BodyShape.DECISIONS, Work.GENERATE)
    AUDIO_TRANSCRIPTIONS = (
        "/v1/audio/transcriptions",
        "audio_transcriptions",
        ApiShape.OPENAI,
        BodyShape.AUDIO,
        Work.GENERATE,
    )
    AUDIO_TRANSLATIONS = (
        "/v1/audio/translations",
        "audio_translations",
        ApiShape.OPENAI,
        BodyShape.AUDIO,
        Work.GENERATE,
    )
    EMBEDDINGS = ("/v1/embeddings", "embeddings", ApiShape.OPENAI, BodyShape.EMBEDDINGS, Work.POOL)
    COHERE_EMBED = ("/v2/embed", "cohere_embed", ApiShape.OPENAI, BodyShape.COHERE_EMBED, Work.POOL)
    POOLING = ("/pooling", "pooling", ApiShape.OPENAI, BodyShape.POOLING, Work.POOL)
    CLASSIFY = ("/classify", "classify", ApiShape.OPENAI, BodyShape.POOLING, Work.POOL)
    SCORE = ("/score", "score", ApiShape.OPENAI, BodyShape.SCORE, Work.POOL)
    SCORE_V1 = ("/v1/score", "score", ApiShape.OPENAI, BodyShape.SCORE, Work.POOL)
    RERANK = ("/rerank", "rerank", ApiShape.OPENAI, BodyShape.RERANK, Work.POOL)
    RERANK_V1 = ("/v1/rerank", "rerank", ApiShape.OPENAI, BodyShape.RERANK, Work.POOL)
    RERANK_V2 = ("/v2/rerank", "rerank", ApiShape.OPENAI, BodyShape.RERANK, Work.POOL)
    TOKENIZE = ("/tokenize", "tokenize", ApiShape.OPENAI, BodyShape.TOKENIZE, Work.RENDER)
    CHAT_RENDER = (
        "/v1/chat/completions/render",
        "render",
        ApiShape.OPENAI,
        BodyShape.CHAT,
        Work.RENDER,
    )
    COMPLETIONS_RENDER = (
        "/v1/completions/render",
        "render",
        ApiShape.OPENAI,
        BodyShape.COMPLETIONS,
        Work.RENDER,
    )
    RESPONSES_RENDER = (
        "/v1/responses/render",
        "render",
        ApiShape.OPENAI,
        BodyShape.RESPONSES,
        Work.RENDER,
    )
    MESSAGES_RENDER = (
        "/v1/messages/render",
        "render",
        ApiShape.ANTHROPIC,
        BodyShape.MESSAGES,
        Work.RENDER,
    )
    COHERE_CHAT_RENDER = ("/cohere/v2/chat/render", "render", ApiShape.COHERE,
                          BodyShape.COHERE_CHAT, Work.RENDER)  # fmt: skip

    def __init__(self, path: str, label: str, api: ApiShape, shape: BodyShape, work: Work) -> None:
        self.path = path
        self.label = label
        self.api = api
        self.shape = shape
        self.work = work

    @property
    def anthropic(self) -> bool:
        """Whether errors and broken streams take Anthropic's shape."""
        return self.api is ApiShape.ANTHROPIC


# Routes whose series are made up front (the rest on first use): they carry nearly all
# traffic, and every route x decision x reason at zero would be thousands of series.
PRIMARY_ROUTES = (Route.CHAT, Route.COMPLETIONS, Route.RESPONSES, Route.MESSAGES)
ROUTE_LABELS = tuple(dict.fromkeys(route.label for route in Route))
ROUTES_BY_PATH = {route.path: route for route in Route}

# Read-only routes: health, metadata, stored answers, token ids back to text. Any method.
PASSED = (
    "/health", "/ping", "/load", "/version", "/kv_event_sources", "/v1/models",
    "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc", "/static/{path}",
    "/tokenizer_info", "/detokenize", "/v1/responses/{response_id}",
    "/v1/responses/{response_id}/cancel", "/v1/chat/completions/derender",
    "/v1/completions/derender", "/is_scaling_elastic_ep", "/fault_tolerance/status",
    "/is_sleeping", "/is_paused", "/weight_info", "/get_world_size",
)  # fmt: skip

# Routes that change the server (or disclose its configuration and environment).
ADMIN = (
    "/v1/load_lora_adapter", "/v1/unload_lora_adapter", "/adapters", "/adapters/{adapter_name}",
    "/start_profile", "/stop_profile", "/fault_tolerance/apply", "/reset_prefix_cache",
    "/reset_mm_cache", "/reset_encoder_cache", "/collective_rpc", "/server_info", "/sleep",
    "/release_kv_cache_memory", "/wake_up", "/pause", "/resume", "/abort_requests",
    "/inference/v1/abort_requests", "/init_weight_transfer_engine",
    "/shutdown_weight_transfer_engine", "/start_weight_update", "/start_draft_weight_update",
    "/update_weights", "/finish_weight_update", "/update_weight_version", "/weight_checker",
    "/scale_elastic_ep",
)  # fmt: skip

# Routes the sidecar cannot price at all: a realtime audio session over a websocket.
UNPRICEABLE = ("/v1/realtime",)


class PathKind(StrEnum):
    """What a request path is, as vLLM would route it."""

    INSPECTED = "inspected"
    PASSED = "passed"
    ADMIN = "admin"
    UNPRICEABLE = "unpriceable"
    METRICS = "metrics"  # vLLM mounts Prometheus on every path that starts with /metrics
    UNKNOWN = "unknown"


def _pattern(paths: tuple[str, ...]) -> re.Pattern[str]:
    """One regex for templated paths, a ``{param}`` matching one segment as Starlette's does."""
    alternatives = (re.sub(r"\\\{\w+\\\}", "[^/]+", re.escape(path)) for path in paths)
    return re.compile("(?:" + "|".join(alternatives) + ")")


_PASSED = _pattern(PASSED)
_ADMIN = _pattern(ADMIN)
_UNPRICEABLE = _pattern(UNPRICEABLE)


def match_path(path: str) -> PathKind:
    """The kind of a decoded request path, matched exactly and case-sensitively."""
    if path in ROUTES_BY_PATH:
        return PathKind.INSPECTED
    if path.startswith("/metrics"):
        return PathKind.METRICS
    for pattern, kind in (
        (_ADMIN, PathKind.ADMIN),
        (_UNPRICEABLE, PathKind.UNPRICEABLE),
        (_PASSED, PathKind.PASSED),
    ):
        if pattern.fullmatch(path):
            return kind
    return PathKind.UNKNOWN
