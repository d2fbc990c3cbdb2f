"""advisor.prometheus: a synthetic traffic from histogram buckets, with a canned Prometheus."""

from __future__ import annotations

from typing import Any

import pytest

from sidecar.advisor import prometheus
from sidecar.errors import ConfigurationError


def vector(**values: float) -> list[dict[str, Any]]:
    return [{"metric": {"le": le}, "value": [0, str(v)]} for le, v in values.items()]


ANSWERS: dict[str, list[dict[str, Any]]] = {
    "vlm_sidecar_image_pixels": vector(**{"1000000.0": 3, "5000000.0": 4, "+Inf": 4}),
    "vlm_sidecar_request_images": vector(**{"0.0": 0, "1.0": 2, "2.0": 3, "4.0": 4, "+Inf": 4}),
}
TOTALS = {
    "vlm_sidecar_request_images_count": 4.0,
    "vlm_sidecar_request_images_sum": 7.0,
    "vlm_sidecar_request_prompt_tokens_sum": 4000.0,
    "vlm_sidecar_request_visual_tokens_sum": 3600.0,
    "vlm_sidecar_request_kv_bytes_sum": 4 * 1500 * 57344.0,
    "vlm_sidecar_request_duration_seconds_sum": 2.0,
}


def canned(expr: str, state_bytes: float | None = None) -> list[dict[str, Any]]:
    if "kv_state_bytes_per_request" in expr:  # an attention-only model's series, or none
        return [] if state_bytes is None else [{"metric": {}, "value": [0, str(state_bytes)]}]
    if expr.startswith("max(timestamp("):
        return [{"metric": {}, "value": [0, "1700000000.5"]}]
    if expr.startswith("group by (model)"):
        return [{"metric": {"model": "Qwen/Qwen2.5-VL-7B-Instruct"}, "value": [0, "1"]}]
    if "kv_bytes_per_token" in expr:
        return [{"metric": {}, "value": [0, "57344"]}]
    for name, rows in ANSWERS.items():
        if f"{name}_bucket" in expr:
            return rows
    for name, total in TOTALS.items():
        if f"{name}[" in expr:
            return [{"metric": {}, "value": [0, str(total)]}]
    raise AssertionError(expr)


def test_the_synthetic_traffic_follows_the_buckets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prometheus, "prometheus_query", lambda url, at=None: canned)
    contents, notes = prometheus.synthetic_traffic("http://prometheus", window="1h")
    records = contents.records
    assert len(records) == 4
    assert [r.arrival for r in records] == [0, 900, 1800, 2700]  # the window's mean rate
    images = [image for r in records if r.cost for image in r.cost.images]
    assert len(images) == 7  # the request_images sum: 3 + 1 known sizes, 3 of unknown size
    pixels = sorted((w or 0) * (h or 0) for w, h, _, _ in images if w)
    assert len(pixels) == 4
    assert pixels[:3] == pytest.approx([1_000_000] * 3, rel=0.01)
    assert pixels[3] == pytest.approx(5_000_000, rel=0.01)
    assert sum(1 for _, _, _, source in images if source == "url") == 3
    assert [len(r.cost.images) for r in records if r.cost] == [1, 1, 2, 3]  # 4 trimmed to 3
    cost = records[0].cost
    assert cost is not None
    assert (cost.text_tokens, cost.output_tokens) == (100, 500)
    assert records[0].held_seconds == 0.5
    assert notes[0].startswith("ESTIMATE")


def test_a_hybrid_models_per_request_state_is_not_read_as_output_tokens(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each request held 1,500 tokens' blocks plus 6 recurrent-state blocks of 51,380,224 bytes.
    state = 6 * 51_380_224.0
    totals = {**TOTALS, "vlm_sidecar_request_kv_bytes_sum": 4 * (1500 * 57344.0 + state)}

    def query(expr: str) -> list[dict[str, Any]]:
        if "request_kv_bytes_sum[" in expr:
            return [{"metric": {}, "value": [0, str(totals["vlm_sidecar_request_kv_bytes_sum"])]}]
        return canned(expr, state_bytes=state)

    monkeypatch.setattr(prometheus, "prometheus_query", lambda url, at=None: query)
    contents, _ = prometheus.synthetic_traffic("http://prometheus", window="1h")
    cost = contents.records[0].cost
    assert cost is not None
    assert cost.output_tokens == 500


def test_a_window_is_a_prometheus_duration() -> None:
    assert prometheus.window_seconds("24h") == 86400
    assert prometheus.window_seconds("7d") == 7 * 86400
    with pytest.raises(ConfigurationError, match="duration"):
        prometheus.window_seconds("a day")


def test_only_http_urls_are_queried() -> None:
    with pytest.raises(ConfigurationError, match="http"):
        prometheus.prometheus_query("file:///etc/passwd")


def test_an_unreachable_prometheus_is_named() -> None:
    query = prometheus.prometheus_query("http://127.0.0.1:9")
    with pytest.raises(ConfigurationError, match=r"127\.0\.0\.1:9"):
        query("up")
