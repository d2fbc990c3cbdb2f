"""A stand-in for vLLM, for tests and demos.  It is NOT vLLM: it generates no text worth reading.

It speaks vLLM 0.33's HTTP surface closely enough to exercise the sidecar on 127.0.0.1:

- ``POST /v1/chat/completions``, ``/v1/completions``, ``/v1/responses``, ``/v1/messages``:
  JSON answers with ``usage``, or SSE with ``"stream": true`` (usage chunk only with
  ``stream_options.include_usage``).  ``prompt_tokens`` comes from ``config.prompt_tokens_fn``;
  completion tokens are ``min(config.completion_tokens, max_tokens, room left in the context)``.
  Every request is recorded byte for byte in ``server.requests``.
- ``GET /health`` (200, or 503 when unhealthy), ``GET /v1/models``, ``GET /metrics``.
- Anything else echoes: ``POST|PUT|PATCH /echo[/...]`` returns the body it got; every other
  request gets JSON describing its method, path, query, headers and body size.

Modules: ``config`` (settings, faults, token counts), ``replies`` (bodies), ``metrics``
(``/metrics``), ``server`` (routes and runner).

Fault vocabulary (inference routes only).  Set ``StandinConfig.fault`` for every request, or send
``x-standin-fault: <token>[, <token>...]`` to replace it for one request:

==================  ==========================================================================
``delay=S``         wait S seconds before the first byte
``chunk-delay=S``   wait S seconds between SSE events (overrides ``config.chunk_delay_seconds``)
``status=N``        answer status N (400-599) with a vLLM error body (Anthropic's on /v1/messages)
``hang``            never answer; the handler ends when the client leaves or the server stops
``reset-after=K``   abort the connection after K SSE events (JSON: after half the body)
``malformed``       SSE: a cut-off JSON event and a line without a field name; JSON: half a body
``close``           close the connection before sending any header
==================  ==========================================================================

An unknown token answers 400 with ``param: "x-standin-fault"``.  A prompt longer than
``max_model_len`` answers vLLM's 400 (``Input length (N) exceeds model's maximum context length``).
"""

from sidecar.standin.config import (
    Fault,
    StandinConfig,
    TokenFn,
    crude_image_tokens,
    crude_prompt_tokens,
)
from sidecar.standin.server import (
    FAULT_HEADER,
    STATE,
    RecordedRequest,
    StandinServer,
    StandinState,
    make_standin_app,
    run_standin,
    start_standin,
)

__all__ = [
    "FAULT_HEADER",
    "STATE",
    "Fault",
    "RecordedRequest",
    "StandinConfig",
    "StandinServer",
    "StandinState",
    "TokenFn",
    "crude_image_tokens",
    "crude_prompt_tokens",
    "make_standin_app",
    "run_standin",
    "start_standin",
]
