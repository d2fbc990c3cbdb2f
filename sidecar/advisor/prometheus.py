"""A synthetic traffic from the sidecar's histograms in Prometheus, when no traffic log exists.

It is an estimate at bucket level, and every report built on it says so:

- images: ``vlm_sidecar_image_pixels`` buckets, each image at its bucket's upper edge
  (conservative), 4:3; images whose size was never known (``assume_max`` URLs) are the
  difference to ``vlm_sidecar_request_images_sum`` and are URL images of unknown size;
- images per request: ``vlm_sidecar_request_images`` buckets, at the upper edge, trimmed to
  the recorded total;
- text tokens: the mean of prompt minus visual tokens per request
  (``vlm_sidecar_request_prompt_tokens`` and ``_visual_tokens``); output tokens: the mean of
  the KV tokens (``vlm_sidecar_request_kv_bytes``, less a hybrid model's per-request state
  ``vlm_sidecar_kv_state_bytes_per_request``, over KV bytes per token) minus the prompt;
- arrivals: evenly spaced at the window's mean rate; service time: the mean
  ``vlm_sidecar_request_duration_seconds``. At most ``MAX_REQUESTS`` requests, at that rate.

Every value is ``increase(...[window])`` summed over the sidecar's series, evaluated at the
last scrape (so nothing is extrapolated past the data), and rounded.
"""

from __future__ import annotations

import math
import re
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

import orjson

from sidecar.advisor.records import RecordedCost, RecordedImage, TrafficLogContents, TrafficRecord
from sidecar.errors import ConfigurationError

MAX_REQUESTS = 100_000
TIMEOUT_SECONDS = 10.0
_DURATION = re.compile(r"^(\d+)([smhdw])$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}

Query = Callable[[str], list[dict[str, Any]]]


def prometheus_query(url: str, at: float | None = None) -> Query:
    """Instant queries against Prometheus' HTTP API at ``url``, evaluated at ``at`` (unix
    seconds; None: now)."""
    base = url.rstrip("/")
    if urllib.parse.urlsplit(base).scheme not in ("http", "https"):
        raise ConfigurationError(f"--prometheus {url}: expected an http(s) URL")

    def query(expr: str) -> list[dict[str, Any]]:
        params = {"query": expr} | ({} if at is None else {"time": f"{at:.3f}"})
        target = f"{base}/api/v1/query?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(target, timeout=TIMEOUT_SECONDS) as answer:  # noqa: S310 - scheme checked above
                payload = orjson.loads(answer.read())
        except (OSError, orjson.JSONDecodeError) as exc:
            raise ConfigurationError(f"--prometheus {url}: {exc}") from None
        if payload.get("status") != "success":
            raise ConfigurationError(f"--prometheus {url}: {payload.get('error', payload)}")
        result: list[dict[str, Any]] = payload["data"]["result"]
        return result

    return query


def window_seconds(window: str) -> int:
    """``24h`` -> 86400 (Prometheus' single-unit durations)."""
    match = _DURATION.match(window.strip())
    if match is None:
        raise ConfigurationError(f"--window {window}: expected a duration such as 30m, 24h or 7d")
    return int(match.group(1)) * _SECONDS[match.group(2)]


def _buckets(query: Query, metric: str, window: str) -> list[tuple[float, int]]:
    """(upper edge, count in that bucket alone), from the cumulative buckets."""
    rows = query(f"sum by (le) (increase({metric}_bucket[{window}]))")
    edges = sorted((float(r["metric"]["le"]), float(r["value"][1])) for r in rows)
    counts, below = [], 0.0
    for edge, cumulative in edges:
        counts.append((edge, round(cumulative - below)))
        below = max(below, cumulative)
    return counts


def _total(query: Query, expr: str) -> float:
    rows = query(f"sum({expr})")
    return float(rows[0]["value"][1]) if rows else 0.0


def _finite(edge: float, edges: list[tuple[float, int]]) -> float:
    """+Inf stands for twice the largest finite edge."""
    finite = [e for e, _ in edges if math.isfinite(e)]
    return edge if math.isfinite(edge) else 2 * max(finite, default=1.0)


def _sizes(pixel_buckets: list[tuple[float, int]]) -> list[RecordedImage]:
    """Images at their buckets' upper edges, 4:3, small and large interleaved."""
    sizes: list[RecordedImage] = []
    for edge, count in pixel_buckets:
        pixels = _finite(edge, pixel_buckets)
        width = max(1, round(math.sqrt(pixels * 4 / 3)))
        sizes += [(width, max(1, round(pixels / width)), "jpeg", "data")] * count
    return sizes[::2] + sizes[1::2][::-1]


def _images_per_request(buckets: list[tuple[float, int]], total: int) -> list[int]:
    """Each request's image count at its bucket's upper edge, trimmed toward the lower edge
    until the counts sum to ``total``."""
    counts: list[tuple[int, int]] = []  # (count, lowest allowed)
    lower = -1
    for edge, requests in buckets:
        upper = int(_finite(edge, buckets))
        counts += [(upper, lower + 1)] * requests
        lower = upper
    excess = sum(c for c, _ in counts) - total
    trimmed = []
    for count, lowest in counts:
        cut = max(0, min(excess, count - lowest))
        excess -= cut
        trimmed.append(count - cut)
    return trimmed


def synthetic_traffic(url: str, *, window: str) -> tuple[TrafficLogContents, list[str]]:
    """A traffic built from the histograms, and the notes that say it is an estimate."""
    seconds = window_seconds(window)
    # Evaluated at the last scrape, so increase() does not extrapolate past the data.
    latest = prometheus_query(url)("max(timestamp(vlm_sidecar_model_kv_bytes_per_token))")
    query = prometheus_query(url, float(latest[0]["value"][1]) if latest else None)
    models = query("group by (model) (vlm_sidecar_model_kv_bytes_per_token)")
    model = models[0]["metric"].get("model", "unknown") if models else "unknown"
    requests = round(_total(query, f"increase(vlm_sidecar_request_images_count[{window}])"))
    if requests <= 0:
        raise ConfigurationError(f"--prometheus {url}: no priced requests in the last {window}")

    def mean(metric: str) -> float:
        return _total(query, f"increase({metric}_sum[{window}])") / requests

    all_images = round(mean("vlm_sidecar_request_images") * requests)
    sizes = _sizes(_buckets(query, "vlm_sidecar_image_pixels", window))
    sizes += [(None, None, None, "url")] * max(0, all_images - len(sizes))
    per_request = _images_per_request(
        _buckets(query, "vlm_sidecar_request_images", window), all_images
    )
    text = max(
        0,
        round(
            mean("vlm_sidecar_request_prompt_tokens") - mean("vlm_sidecar_request_visual_tokens")
        ),
    )
    kv_tokens = _kv_tokens_per_request(query, window, model, mean("vlm_sidecar_request_kv_bytes"))
    output = max(1, round(kv_tokens - mean("vlm_sidecar_request_prompt_tokens")))
    held = mean("vlm_sidecar_request_duration_seconds")
    kept = min(requests, MAX_REQUESTS)
    spacing = seconds / requests
    records, taken = [], 0
    for number in range(kept):
        count = per_request[number] if number < len(per_request) else 0
        images = tuple(sizes[taken : taken + count])
        taken += count
        cost = RecordedCost(images, text, False, output, output)
        records.append(
            TrafficRecord(
                f"synthetic-{number}",
                number * spacing,
                "chat_completions",
                model,
                "admit",
                "within_budget",
                0.0,
                held,
                held,
                cost,
            )
        )
    notes = [
        f"ESTIMATE: a synthetic traffic of {kept:,} requests built from Prometheus histograms "
        f"over {window} ({requests:,} requests): images at bucket upper edges, 4:3; text "
        f"{text:,} and output {output:,} tokens per request (means); arrivals evenly spaced, "
        f"service time {held:.2f} s (mean)"
    ]
    return TrafficLogContents(tuple(records), None, 0, 0), notes


def _kv_tokens_per_request(query: Query, window: str, model: str, kv_bytes: float) -> float:
    per_token = query(f'max(vlm_sidecar_model_kv_bytes_per_token{{model="{model}"}})')
    bytes_per_token = float(per_token[0]["value"][1]) if per_token else 0.0
    state = query(f'max(vlm_sidecar_kv_state_bytes_per_request{{model="{model}"}})')
    state_bytes = float(state[0]["value"][1]) if state else 0.0
    return max(0.0, kv_bytes - state_bytes) / bytes_per_token if bytes_per_token else 0.0
