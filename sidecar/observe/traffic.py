"""The traffic log: one compact JSON line per inspected request, for ``vlm-sidecar replay``.

``SIDECAR_TRAFFIC_LOG`` names the file (unset: off). Each line carries what re-pricing the
request under other settings needs, and no content: image sizes (after EXIF orientation),
formats and sources, token counts, the output tokens asked for, timings and the decision.
docs/traffic-log.md is the contract for the fields; ``observe.traffic_format`` holds their
names, their order and the format's version. The first line of every file (and of each
start) is a ``settings`` header: the settings in force, so a replay changes only what it is
told to.

Writing never blocks the event loop: the line is serialised on the loop (orjson, a few
microseconds) and handed to a bounded queue; a ``QueueListener`` thread writes it through a
``RotatingFileHandler`` (``SIDECAR_TRAFFIC_LOG_MAX_BYTES``, one backup ``FILE.1``). When the
disk cannot keep up, lines are dropped and counted rather than held in memory.
"""

from __future__ import annotations

import hashlib
import logging
import logging.handlers
import queue
import secrets
import time
from collections.abc import Callable
from typing import Any

import orjson

from sidecar.body.request_body import RequestBody
from sidecar.cost.assembly import PricingPolicy, media_prompt_tokens, prompt_visual_tokens
from sidecar.cost.prediction import RequestPrediction, VideoCost
from sidecar.observe.record import RequestRecord, prediction_error_split
from sidecar.observe.traffic_format import header_line
from sidecar.routes import BodyShape
from sidecar.settings import Settings, TenantInLog

QUEUE_LINES = 10_000
# Settings that say where the sidecar runs, not how it prices: left out of the header.
# The tenant salt stays out too: with it, anyone reading the log could test tenant names.
_NOT_IN_HEADER = frozenset(
    {
        "upstream_url",
        "listen_host",
        "port",
        "metrics_port",
        "traffic_log",
        "traffic_log_tenant_salt",
    }
)


def tenant_hasher(settings: Settings) -> Callable[[str], str]:
    """How the log writes a tenant: as sent, or the first 16 hex digits of the SHA-256 of
    the salt and the tenant (a salt drawn at random per process when none is set)."""
    if settings.traffic_log_tenant is TenantInLog.AS_SENT:
        return lambda tenant: tenant
    salt = (settings.traffic_log_tenant_salt or secrets.token_hex(16)).encode()
    return lambda tenant: hashlib.sha256(salt + tenant.encode()).hexdigest()[:16]


def traffic_entry(
    record: RequestRecord,
    model: str,
    policy: PricingPolicy,
    tenant_in_log: Callable[[str], str] = str,
) -> dict[str, Any]:
    """The traffic log line of one finished request (see docs/traffic-log.md), its fields
    in ``traffic_format.LINE_ORDER``: written out here, not looked up, on every request."""
    end = record.finished_at or time.perf_counter()
    sent = record.upstream_sent_at
    entry: dict[str, Any] = {
        "id": record.request_id,
        "t": round(record.arrived_unix, 6),
        "route": record.route.label,
        "model": model,
        "decision": record.decision.value,
        "reason": record.reason.value,
        "wait": round(record.waited_seconds, 6),
        "dur": round(end - record.arrived_at, 6),
        "held": None if sent is None else round(end - sent, 6),
    }
    tags = record.queue_tags  # only what the request said: most lines carry none
    if tags.objective is not None:
        entry["obj"] = tags.objective
    if tags.body_priority is not None:
        entry["prio"] = tags.body_priority
    if tags.tenant:
        entry["tenant"] = tenant_in_log(tags.tenant)
    priced = record.original or record.prediction  # the request as the client sent it
    if priced is not None and record.parsed is not None:
        entry |= _cost_fields(priced, record.parsed, policy)
    usage, forwarded = record.usage, record.forwarded
    if usage is not None:
        entry["obs"] = usage.prompt_tokens
        split = None if forwarded is None else prediction_error_split(usage, forwarded)
        if split is not None:  # vLLM's --enable-prompt-tokens-details: the rule against it
            entry["img_err"] = split[0]
    return entry


def _cost_fields(
    priced: RequestPrediction, parsed: RequestBody, policy: PricingPolicy
) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "img": [[i.width_px, i.height_px, i.format, i.source] for i in priced.images],
        "text": priced.text_tokens,
        "exact": priced.text_tokens_exact,
        "out": priced.output_tokens,
        "out_req": parsed.max_output_tokens,
        "n": priced.n,
        "seqs": priced.sequences,
        "kv_held": priced.holds_kv,
        "visual": priced.visual_tokens,
        "prompt": priced.prompt_tokens,
        "kv": priced.kv_bytes,
    }
    if parsed.media:
        videos = iter(priced.videos)
        fields["media"] = [
            _video_item(next(videos)) if item.kind == "video" else [item.kind]
            for item in parsed.media
        ]
    if len(parsed.sequences) > 1 or parsed.route.shape is BodyShape.GENERATE:
        fields["seq"] = _sequence_fields(priced, parsed, policy)
    if parsed.pixel_range is not None:
        fields["px"] = [parsed.pixel_range.min_pixels, parsed.pixel_range.max_pixels]
    return fields


def _video_item(video: VideoCost) -> list[Any]:
    tokens = video.tokens
    return ["video", tokens.tokens, tokens.wrapper_tokens, video.allowance_reason is not None]


def _sequence_fields(
    priced: RequestPrediction, parsed: RequestBody, policy: PricingPolicy
) -> list[list[Any]]:
    """Each prompt as ``[text, floor, images, media]``: its prompt tokens are
    ``max(floor, visual + text)``, where a ``generate`` prompt's floor is its token ids (they
    already hold the media positions). The prediction keeps only the prompts' total and the
    longest, so the text is split to keep both exact: the prompt likely to be the longest
    gets the text that makes it so, the others share the rest by their characters."""
    sequences = parsed.sequences
    if parsed.route.shape is BodyShape.GENERATE:
        return [[0, s.token_ids, [*s.images], [*s.media]] for s in sequences]
    positions = media_prompt_tokens([item.kind for item in parsed.media], priced.videos, policy)
    visual = [
        prompt_visual_tokens((0, 0, s.images, s.media), priced.images, positions) for s in sequences
    ]
    weights = [s.text_chars + s.token_ids + 1 for s in sequences]
    total, whole = priced.text_tokens, sum(weights)
    longest = max(range(len(sequences)), key=lambda n: visual[n] + total * weights[n] / whole)
    texts = [0] * len(sequences)
    texts[longest] = min(total, max(0, priced.longest_prompt_tokens - visual[longest]))
    rest, others = total - texts[longest], whole - weights[longest]
    for n, weight in enumerate(weights):
        if n != longest:
            texts[n] = rest * weight // others if others else 0
    texts[longest] += total - sum(texts)  # rounding: the totals stay the pricer's
    return [[t, 0, [*s.images], [*s.media]] for t, s in zip(texts, sequences, strict=True)]


class _DroppingQueueHandler(logging.handlers.QueueHandler):
    """Hands finished lines to the writer thread; drops (and counts) them when it lags."""

    def __init__(self, lines: queue.Queue[logging.LogRecord]) -> None:
        super().__init__(lines)
        self.dropped = 0

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        return record  # the message is the finished line

    def enqueue(self, record: logging.LogRecord) -> None:
        try:
            self.queue.put_nowait(record)
        except queue.Full:
            self.dropped += 1


class _Listener(logging.handlers.QueueListener):
    """The writer thread; stopping it waits for room in a full queue instead of failing."""

    def enqueue_sentinel(self) -> None:
        self.queue.put(self._sentinel)  # type: ignore[attr-defined]


class _RotatingWithHeader(logging.handlers.RotatingFileHandler):
    """A rotating file whose every generation starts with the settings header."""

    def __init__(self, path: str, max_bytes: int, header: str) -> None:
        super().__init__(path, maxBytes=max_bytes, backupCount=1, encoding="utf-8")
        self.header = header

    def doRollover(self) -> None:
        super().doRollover()
        if self.stream is not None:
            self.stream.write(self.header + self.terminator)


class TrafficLog:
    """The sidecar's traffic log; every method does nothing when ``SIDECAR_TRAFFIC_LOG`` is
    unset."""

    def __init__(self, settings: Settings, model: str) -> None:
        self.path = settings.traffic_log
        self.model = model
        self.policy = PricingPolicy.from_settings(settings)
        self.tenant_in_log = tenant_hasher(settings)
        self._header = orjson.dumps(settings_header(settings)).decode()
        self._max_bytes = int(settings.traffic_log_max_bytes)
        self._handler: _DroppingQueueHandler | None = None
        self._listener: _Listener | None = None

    @property
    def dropped(self) -> int:
        """Lines dropped because the writer thread fell behind."""
        return 0 if self._handler is None else self._handler.dropped

    def start(self) -> None:
        """Open the file (appending), write the settings header, start the writer thread."""
        if self.path is None or self._listener is not None:
            return
        writer = _RotatingWithHeader(self.path, self._max_bytes, self._header)
        writer.setFormatter(logging.Formatter("%(message)s"))
        writer.handle(logging.makeLogRecord({"msg": self._header}))
        lines: queue.Queue[logging.LogRecord] = queue.Queue(QUEUE_LINES)
        self._handler = _DroppingQueueHandler(lines)
        self._listener = _Listener(lines, writer)
        self._listener.start()

    def write(self, record: RequestRecord) -> None:
        """Queue the request's line; never blocks."""
        if self._handler is None:
            return
        entry = traffic_entry(record, self.model, self.policy, self.tenant_in_log)
        line = orjson.dumps(entry).decode()
        self._handler.handle(logging.makeLogRecord({"msg": line}))

    def stop(self) -> None:
        """Write what is queued, then close the file."""
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.stop()
            for handler in listener.handlers:
                handler.close()


def settings_header(settings: Settings) -> dict[str, Any]:
    """The first line of each file: the settings in force when it was started."""
    return header_line(settings.model_dump(mode="json", exclude=set(_NOT_IN_HEADER)), time.time())
