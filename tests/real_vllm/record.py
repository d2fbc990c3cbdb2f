"""Record golden exchanges with real vLLM (CPU, tiny Qwen2.5-VL) into ``tests/data/vllm/``.

    .venv/bin/python -m tests.real_vllm.record [--only NAME ...]

For each case two files: ``<case>.json`` (the request as sent, the status, the response
headers, and the vLLM version) and ``<case>.body`` (the response body bytes: JSON, SSE or
Prometheus text). Requests go as raw HTTP through ``http.client``, so nothing is re-encoded
and redirects are not followed.

Volatile values are normalized in place, with replacements of the same length so
``content-length`` stays true and SSE framing is unchanged:

* ids (``id``, ``item_id``, ``response_id``, ``system_fingerprint``) ending in 8+ hex digits
  (``chatcmpl-``, ``cmpl-``, ``resp_``, ``msg_``, ``modelperm-``, ``vllm-0.32.0-`` ...): the hex
  becomes ``0``s. Ids that vLLM derives from ``x-request-id`` (``chatcmpl-golden-chat``) stay;
* ``"created"``, ``"created_at"``, ``"completed_at"`` integer timestamps: ``1`` then ``0``s;
* the repository path (``/v1/models`` ``root``) becomes ``<repo>``: the only replacement that
  changes a length, so ``models.body`` is the one file whose ``content-length`` is stale;
* the ``date`` response header is dropped; ``x-request-id`` is fixed by the request, and so
  is ``Host`` (``vllm.test:8000``): vLLM's 307 for a trailing slash builds its absolute
  ``Location`` from it.

A second engine run with ``--enable-prompt-tokens-details`` records the ``details-*`` cases
(``usage.prompt_tokens_details``, cached prefixes).

In ``<case>.json`` the request body is shortened: every string over 256 characters (image
data URIs, long prompts) becomes ``<first 48 chars>...<N chars, sha256 <16 hex>>``;
``cases.py``/``record.py`` rebuild the exact body deterministically.

Generated text is left as is: the weights are seeded and decoding is greedy, so it is
reproducible on the same build, but it is noise; tests should read shapes and usage.
``metrics.body`` keeps only the ``vllm:`` lines (values drift with load; labels do not).
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.real_vllm.cases import anthropic_image, data_uri, image_part, png_bytes
from tests.real_vllm.engine import ROOT, VllmServer
from tests.real_vllm.models import ensure_built

OUT = ROOT / "tests" / "data" / "vllm"
MODEL = "tiny-qwen2.5-vl"
IMAGE_LIMIT = 4  # --limit-mm-per-prompt image count the engine runs with

_ID = re.compile(
    rb'("(?:id|item_id|response_id|system_fingerprint)"\s*:\s*")'
    rb"((?:chatcmpl-tool-|chatcmpl-|cmpl-|resp_|msg_|rs_|fc_|modelperm-|vllm-[0-9.]+-)?)"
    rb"([0-9a-fA-F]{8,})\b"
)
_TIME = re.compile(rb'("(?:created|created_at|completed_at)"\s*:\s*)(\d+)')
# Routes echo the Host header; recorded with a fixed one so Location headers are stable.
HOST = "vllm.test:8000"


def normalize(body: bytes) -> bytes:
    body = _ID.sub(lambda m: m[1] + m[2] + b"0" * len(m[3]), body)
    body = _TIME.sub(lambda m: m[1] + b"1" + b"0" * (len(m[2]) - 1), body)
    return body.replace(str(ROOT).encode(), b"<repo>")


@dataclass(frozen=True)
class Exchange:
    """One recorded request."""

    name: str
    method: str
    path: str
    body: dict[str, Any] | None = None
    raw_body: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    note: str = ""


def _chat(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "messages": messages, "max_tokens": 4, "temperature": 0} | extra


def _user(*parts: Any) -> list[dict[str, Any]]:
    content = [{"type": "text", "text": p} if isinstance(p, str) else p for p in parts]
    return [{"role": "user", "content": content}]


def exchanges() -> list[Exchange]:
    text = [{"role": "user", "content": "Describe the colour of the sky."}]
    image = _user(image_part(64, 64), "What is this?")
    usage = {"include_usage": True}
    junk = base64.b64encode(b"this is plain text, not an image at all").decode()
    return [
        Exchange("models", "GET", "/v1/models"),
        Exchange("health", "GET", "/health"),
        Exchange("version", "GET", "/version"),
        Exchange("chat", "POST", "/v1/chat/completions", _chat(text)),
        Exchange("chat-image", "POST", "/v1/chat/completions", _chat(image)),
        Exchange("chat-stream", "POST", "/v1/chat/completions", _chat(text, stream=True)),
        Exchange("chat-stream-usage", "POST", "/v1/chat/completions",
                 _chat(text, stream=True, stream_options=usage)),
        Exchange("chat-stream-continuous-usage", "POST", "/v1/chat/completions",
                 _chat(text, stream=True,
                       stream_options={"include_usage": True, "continuous_usage_stats": True})),
        Exchange("chat-image-stream-usage", "POST", "/v1/chat/completions",
                 _chat(image, stream=True, stream_options=usage)),
        Exchange("completions", "POST", "/v1/completions",
                 {"model": MODEL, "prompt": "Once upon a time", "max_tokens": 4}),
        Exchange("completions-stream-usage", "POST", "/v1/completions",
                 {"model": MODEL, "prompt": "Once upon a time", "max_tokens": 4,
                  "stream": True, "stream_options": usage}),
        Exchange("responses", "POST", "/v1/responses",
                 {"model": MODEL, "input": "Say something.", "max_output_tokens": 4}),
        Exchange("responses-image", "POST", "/v1/responses",
                 {"model": MODEL, "max_output_tokens": 4, "input": [{"role": "user", "content": [
                     {"type": "input_text", "text": "What is this?"},
                     {"type": "input_image", "image_url": data_uri(64, 64)}]}]}),
        Exchange("responses-stream", "POST", "/v1/responses",
                 {"model": MODEL, "input": "Say something.", "max_output_tokens": 4,
                  "stream": True}),
        Exchange("messages", "POST", "/v1/messages",
                 {"model": MODEL, "max_tokens": 4,
                  "messages": [{"role": "user", "content": "Hello there."}]}),
        Exchange("messages-image", "POST", "/v1/messages",
                 {"model": MODEL, "max_tokens": 4, "system": "Be brief.",
                  "messages": [{"role": "user", "content": [
                      anthropic_image(64, 64), {"type": "text", "text": "Describe."}]}]}),
        Exchange("messages-stream", "POST", "/v1/messages",
                 {"model": MODEL, "max_tokens": 4, "stream": True,
                  "messages": [{"role": "user", "content": "Hello there."}]}),
        Exchange("messages-count-tokens", "POST", "/v1/messages/count_tokens",
                 {"model": MODEL, "messages": [{"role": "user", "content": [
                     anthropic_image(64, 64), {"type": "text", "text": "Describe."}]}]}),
        Exchange("tokenize-chat", "POST", "/tokenize",
                 {"model": MODEL, "messages": text, "add_generation_prompt": True}),
        # Errors
        Exchange("error-too-many-images", "POST", "/v1/chat/completions",
                 _chat(_user(*[image_part(32, 32, i) for i in range(IMAGE_LIMIT + 1)], "Many.")),
                 note=f"--limit-mm-per-prompt image={IMAGE_LIMIT}, {IMAGE_LIMIT + 1} sent"),
        Exchange("error-too-many-images-stream", "POST", "/v1/chat/completions",
                 _chat(_user(*[image_part(32, 32, i) for i in range(IMAGE_LIMIT + 1)], "Many."),
                       stream=True)),
        Exchange("error-corrupt-base64", "POST", "/v1/chat/completions",
                 _chat(_user({"type": "image_url",
                              "image_url": {"url": "data:image/png;base64,iVBOR!!notbase64@@"}},
                             "x"))),
        Exchange("error-not-an-image", "POST", "/v1/chat/completions",
                 _chat(_user({"type": "image_url",
                              "image_url": {"url": f"data:image/png;base64,{junk}"}}, "x"))),
        Exchange("error-truncated-png", "POST", "/v1/chat/completions",
                 _chat(_user({"type": "image_url", "image_url": {
                     "url": "data:image/png;base64,"
                     + base64.b64encode(png_bytes(64, 64)[:60]).decode()}}, "x")),
                 note="valid PNG header, body cut at 60 bytes"),
        Exchange("error-unknown-model", "POST", "/v1/chat/completions",
                 _chat(text) | {"model": "no-such-model"}),
        Exchange("error-max-tokens-over-context", "POST", "/v1/chat/completions",
                 _chat(text, max_tokens=100_000)),
        Exchange("error-text-over-context", "POST", "/v1/chat/completions",
                 _chat([{"role": "user", "content": "hello " * 9000}]),
                 note="9000 x 'hello ' against --max-model-len 8192"),
        Exchange("error-text-over-context-chars", "POST", "/v1/chat/completions",
                 _chat([{"role": "user", "content": "x" * 200_000}]),
                 note="long enough for the character pre-check"),
        Exchange("error-image-over-context", "POST", "/v1/chat/completions",
                 _chat(_user(image_part(1920, 1080), "hello " * 7000)),
                 note="text fits before expansion, 1222 image tokens push it over"),
        Exchange("error-unknown-part-type", "POST", "/v1/chat/completions",
                 _chat(_user({"type": "hologram", "hologram": {"url": "x"}}, "x"))),
        Exchange("error-mm-processor-kwargs", "POST", "/v1/chat/completions",
                 _chat(image, mm_processor_kwargs={"max_pixels": 12544}),
                 note="vLLM runs without --trust-request-mm-kwargs"),
        Exchange("error-stream-options-without-stream", "POST", "/v1/chat/completions",
                 _chat(text, stream_options=usage)),
        Exchange("error-invalid-json", "POST", "/v1/chat/completions", raw_body=b'{"model": '),
        Exchange("error-messages-unknown-model", "POST", "/v1/messages",
                 {"model": "no-such-model", "max_tokens": 4,
                  "messages": [{"role": "user", "content": "x"}]}),
        Exchange("error-responses-too-many-images", "POST", "/v1/responses",
                 {"model": MODEL, "max_output_tokens": 4, "input": [{"role": "user", "content": [
                     {"type": "input_image", "image_url": data_uri(32, 32, i)}
                     for i in range(IMAGE_LIMIT + 1)]}]}),
        # Routing
        Exchange("trailing-slash-chat", "POST", "/v1/chat/completions/", _chat(text)),
        Exchange("trailing-slash-models", "GET", "/v1/models/"),
        Exchange("unknown-route", "POST", "/v1/unknown", {"x": 1}),
        Exchange("wrong-method", "GET", "/v1/chat/completions"),
    ]  # fmt: skip


def _compact(value: Any) -> Any:
    """The request as stored: strings over 256 characters shortened to a digest marker."""
    if isinstance(value, dict):
        return {k: _compact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_compact(v) for v in value]
    if isinstance(value, str) and len(value) > 256:
        digest = hashlib.sha256(value.encode()).hexdigest()[:16]
        return f"{value[:48]}...<{len(value)} chars, sha256 {digest}>"
    return value


KEEP_HEADERS = ("content-type", "content-length", "transfer-encoding", "location", "allow",
                "x-request-id", "server", "cache-control", "connection")  # fmt: skip


def record_one(port: int, exchange: Exchange) -> dict[str, Any]:
    if exchange.raw_body is not None:
        payload: bytes | None = exchange.raw_body
    elif exchange.body is not None:
        payload = json.dumps(exchange.body).encode()
    else:
        payload = None
    headers = {"Host": HOST, "x-request-id": f"golden-{exchange.name}"} | exchange.headers
    if payload is not None:
        headers["content-type"] = "application/json"
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    connection.request(exchange.method, exchange.path, body=payload, headers=headers)
    reply = connection.getresponse()
    body = reply.read()
    connection.close()
    if exchange.name == "metrics":
        body = b"".join(
            line + b"\n" for line in body.splitlines() if b"vllm:" in line.split(b"{")[0]
        )
    else:
        body = normalize(body)
    kept = {k.lower(): v for k, v in reply.getheaders() if k.lower() in KEEP_HEADERS}
    request: dict[str, Any] = {"method": exchange.method, "path": exchange.path,
                               "headers": headers}  # fmt: skip
    if exchange.body is not None:
        request["json"] = _compact(exchange.body)
    elif exchange.raw_body is not None:
        request["raw"] = exchange.raw_body.decode()
    meta = {"request": request, "status": reply.status, "reason": reply.reason,
            "headers": kept, "note": exchange.note}  # fmt: skip
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{exchange.name}.body").write_bytes(body)
    (OUT / f"{exchange.name}.json").write_text(json.dumps(meta, indent=1) + "\n")
    return meta


def details_exchanges() -> list[Exchange]:
    """Recorded with ``--enable-prompt-tokens-details`` (``usage.prompt_tokens_details``)."""
    image = _user(image_part(64, 64), "What is this?")
    again = [{"role": "user", "content": "A long shared prefix for the prefix cache. " * 40}]
    return [
        Exchange("details-chat-image", "POST", "/v1/chat/completions", _chat(image)),
        Exchange("details-chat-image-stream-usage", "POST", "/v1/chat/completions",
                 _chat(image, stream=True, stream_options={"include_usage": True})),
        Exchange("details-chat-text-first", "POST", "/v1/chat/completions", _chat(again)),
        Exchange("details-chat-text-cached", "POST", "/v1/chat/completions", _chat(again),
                 note="the same body again: its prefix is cached"),
        Exchange("details-responses-image", "POST", "/v1/responses",
                 {"model": MODEL, "max_output_tokens": 4, "input": [{"role": "user", "content": [
                     {"type": "input_text", "text": "What is this?"},
                     {"type": "input_image", "image_url": data_uri(64, 64)}]}]}),
        Exchange("details-messages-image", "POST", "/v1/messages",
                 {"model": MODEL, "max_tokens": 4, "system": "Be brief.",
                  "messages": [{"role": "user", "content": [
                      anthropic_image(64, 64), {"type": "text", "text": "Describe."}]}]}),
        Exchange("details-messages-cached", "POST", "/v1/messages",
                 {"model": MODEL, "max_tokens": 4, "messages": again},
                 note="prefix cached by details-chat-text-*: input_tokens leaves it out"),
        Exchange("details-messages-cached-stream", "POST", "/v1/messages",
                 {"model": MODEL, "max_tokens": 4, "messages": again, "stream": True},
                 note="message_start counts the whole prompt; message_delta splits it"),
    ]  # fmt: skip


def main(argv: list[str]) -> int:
    only = set(argv[argv.index("--only") + 1 :]) if "--only" in argv else set()
    directory = ensure_built(MODEL)
    if not only:  # a full run replaces the whole set, so renamed cases leave nothing behind
        for stale in [*OUT.glob("*.body"), *OUT.glob("*.json")]:
            stale.unlink()
    _record_all(directory, [*exchanges(), Exchange("metrics", "GET", "/metrics")], only, ())
    _record_all(directory, details_exchanges(), only, ("--enable-prompt-tokens-details",))
    return 0


def _record_all(
    directory: Path, todo: list[Exchange], only: set[str], extra_args: tuple[str, ...]
) -> None:
    todo = [e for e in todo if not only or e.name in only]
    if not todo:
        return
    limits = {"image": IMAGE_LIMIT, "video": 0}
    with VllmServer(directory, limit_mm=limits, extra_args=extra_args) as engine:
        for exchange in todo:
            meta = record_one(engine.port, exchange)
            print(f"{meta['status']} {exchange.method} {exchange.path:28} {exchange.name}")
        if not extra_args:
            argv = [a.replace(str(ROOT), "<repo>") for a in engine.argv[1:]]
            argv[argv.index("--port") + 1] = "<port>"
            version = json.loads(normalize(_get(engine.port, "/version")))
            engine_file = {"engine": version, "argv": argv, "model": MODEL}
            (OUT / "_engine.json").write_text(json.dumps(engine_file, indent=1) + "\n")


def _get(port: int, path: str) -> bytes:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    connection.request("GET", path)
    body = connection.getresponse().read()
    connection.close()
    return body


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
