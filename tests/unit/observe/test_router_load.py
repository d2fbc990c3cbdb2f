"""observe.router_load: the two gauges an endpoint picker scores pods by, and how they join
vLLM's exposition without changing a byte of it."""

from __future__ import annotations

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_om
from prometheus_client.parser import text_string_to_metric_families

from sidecar.engine import EngineFacts
from sidecar.observe.router_load import (
    KV_USAGE,
    REQUESTS_WAITING,
    RouterLoad,
    RouterLoadCollector,
    RouterLoadExposition,
    append_to_exposition,
    effective_load,
)

VLLM_TEXT = (
    b"# HELP vllm:num_requests_waiting Requests waiting.\n"
    b"# TYPE vllm:num_requests_waiting gauge\n"
    b'vllm:num_requests_waiting{engine="0",model_name="m"} 2.0\n'
)
VLLM_OPENMETRICS = (
    b"# HELP vllm:num_requests_waiting Requests waiting.\n"
    b"# TYPE vllm:num_requests_waiting gauge\n"
    b'vllm:num_requests_waiting{engine="0",model_name="m"} 2.0\n'
    b"# EOF\n"
)


@pytest.mark.parametrize(
    ("facts", "sidecar_waiting", "inflight", "budget", "expected"),
    [
        (None, 0, 0, 0, RouterLoad(0.0, 0.0)),
        (
            EngineFacts(num_requests_waiting=2.0, kv_cache_usage_perc=0.3),
            5,
            0,
            0,
            RouterLoad(7, 0.3),
        ),
        (EngineFacts(kv_cache_usage_perc=0.3), 0, 600, 1000, RouterLoad(0, 0.6)),
        (EngineFacts(kv_cache_usage_perc=0.9), 1, 600, 1000, RouterLoad(1, 0.9)),
        (EngineFacts(), 0, 1500, 1000, RouterLoad(0, 1.0)),
    ],
    ids=["nothing-read", "queues-add-up", "budget-ahead-of-vllm", "vllm-ahead", "shrunk-budget"],
)
def test_effective_load_adds_the_queues_and_takes_the_fuller_kv_view(
    facts: EngineFacts | None,
    sidecar_waiting: int,
    inflight: int,
    budget: int,
    expected: RouterLoad,
) -> None:
    load = effective_load(
        facts, sidecar_waiting=sidecar_waiting, inflight_kv_bytes=inflight, kv_budget_bytes=budget
    )
    assert load == expected


def _exposition(
    load: RouterLoad, name: str | None = "Qwen/Qwen3-VL-8B-Instruct"
) -> RouterLoadExposition:
    return RouterLoadExposition(RouterLoadCollector("qwen3-vl-8b", lambda: load, lambda: name))


def test_collector_labels_each_gauge_with_the_sidecar_model_and_vllms_served_name() -> None:
    text = _exposition(RouterLoad(4, 0.25)).text().decode()
    samples = {
        sample.name: sample
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    assert set(samples) == {REQUESTS_WAITING, KV_USAGE}
    assert samples[REQUESTS_WAITING].value == 4
    assert samples[KV_USAGE].value == 0.25
    assert samples[KV_USAGE].labels == {
        "model": "qwen3-vl-8b",
        "model_name": "Qwen/Qwen3-VL-8B-Instruct",
    }


def test_collector_falls_back_to_the_model_label_before_vllm_is_read() -> None:
    text = _exposition(RouterLoad(0, 0), name=None).text().decode()
    assert 'model_name="qwen3-vl-8b"' in text


@pytest.mark.parametrize("upstream", [VLLM_TEXT, VLLM_TEXT.rstrip(b"\n"), b""])
def test_text_exposition_keeps_vllms_bytes_and_appends_the_two_families(upstream: bytes) -> None:
    load = _exposition(RouterLoad(3, 0.5))
    joined = append_to_exposition(upstream, "text/plain; version=0.0.4", load)
    assert joined.startswith(upstream)
    names = [family.name for family in text_string_to_metric_families(joined.decode())]
    assert names[-2:] == [REQUESTS_WAITING, KV_USAGE]
    assert len(names) == (1 if upstream else 0) + 2


def test_openmetrics_exposition_gets_the_families_before_its_eof() -> None:
    load = _exposition(RouterLoad(3, 0.5))
    content_type = "application/openmetrics-text; version=1.0.0; charset=utf-8"
    joined = append_to_exposition(VLLM_OPENMETRICS, content_type, load)
    assert joined.startswith(VLLM_OPENMETRICS.removesuffix(b"# EOF\n"))
    assert joined.endswith(b"# EOF\n")
    names = [family.name for family in parse_om(joined.decode())]
    assert names == ["vllm:num_requests_waiting", REQUESTS_WAITING, KV_USAGE]


def test_an_openmetrics_body_without_eof_is_left_as_vllm_sent_it() -> None:
    load = _exposition(RouterLoad(3, 0.5))
    cut = VLLM_OPENMETRICS.removesuffix(b"# EOF\n")
    assert append_to_exposition(cut, "application/openmetrics-text", load) == cut
