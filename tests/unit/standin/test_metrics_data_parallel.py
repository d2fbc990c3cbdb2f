"""The stand-in's data-parallel engines: one series per engine, the pools summed in
``vllm:cache_config_info`` as vLLM 0.33's frontend sums them (``core_client.py``)."""

from __future__ import annotations

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from sidecar.engine import parse_engine_metrics
from sidecar.standin import StandinConfig, StandinState


def _samples(state: StandinState, name: str) -> list[tuple[dict[str, str], float]]:
    text = generate_latest(state.registry).decode()
    return [
        (sample.labels, sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    ]


def test_one_engine_reports_as_before() -> None:
    state = StandinState(StandinConfig(num_gpu_blocks=1000))
    ((labels, _),) = _samples(state, "vllm:cache_config_info")
    assert (labels["engine"], labels["num_gpu_blocks"], labels["kv_cache_size_tokens"]) == (
        "0", "1000", "16000",
    )  # fmt: skip


def test_each_engine_repeats_the_summed_pool_and_keeps_its_own_size_in_tokens() -> None:
    state = StandinState(StandinConfig(num_gpu_blocks=1000, data_parallel_size=4))
    series = _samples(state, "vllm:cache_config_info")
    assert sorted(labels["engine"] for labels, _ in series) == ["0", "1", "2", "3"]
    assert {labels["num_gpu_blocks"] for labels, _ in series} == {"4000"}
    assert {labels["kv_cache_size_tokens"] for labels, _ in series} == {"16000"}
    assert len(_samples(state, "vllm:kv_cache_usage_perc")) == 4


def test_the_sidecar_reads_the_pods_pool_and_its_engine_count() -> None:
    state = StandinState(StandinConfig(num_gpu_blocks=1000, data_parallel_size=2))
    state.set_load(num_requests_waiting=3, kv_cache_usage_perc=0.5)
    facts = parse_engine_metrics(generate_latest(state.registry).decode())
    assert facts.kv_capacity_tokens == 2 * 1000 * 16
    assert facts.data_parallel_engines == 2
    assert facts.num_requests_waiting == 3
    assert facts.kv_cache_usage_perc == 0.5
    assert facts.model_name == "Qwen/Qwen2.5-VL-7B-Instruct"
