"""profiles.kv_geometry under pipeline parallelism: vLLM 0.33's layer split and KV-cache
groups, the busiest stage's per-GPU figures, and the MoE built-ins.

The reference below replays vLLM's own steps layer by layer (``get_pp_indices``, the global
KV-cache groups of ``_get_kv_cache_groups_uniform_page_size``, the projection onto each stage,
``_get_kv_cache_bytes_per_block``), independently of the geometry's arithmetic.
"""

from __future__ import annotations

import pytest

from sidecar.errors import ConfigurationError
from sidecar.profiles import ProfileOverrides, load_profile
from sidecar.profiles.kv_geometry import (
    AttentionKind,
    KvGeometry,
    LayerGroup,
    pipeline_stage_layers,
)
from sidecar.units import format_bytes


def _vllm_pp_indices(
    num_layers: int, rank: int, size: int, partition: str | None = None
) -> tuple[int, int]:
    """vllm/distributed/utils.py ``get_pp_indices``; ``partition`` is VLLM_PP_LAYER_PARTITION."""
    if partition is not None:
        partitions = [int(layer) for layer in partition.split(",")]
        assert len(partitions) == size
        assert sum(partitions) == num_layers
    else:
        per = num_layers // size
        partitions = [per for _ in range(size)]
        if remaining := num_layers % size:
            for i in range(2, remaining + 2):
                partitions[-i] += 1
    start = sum(partitions[:rank])
    return start, start + partitions[rank]


def _vllm_bytes_per_block(
    kinds: list[str], page_bytes: int, pp: int, partition: str | None = None
) -> int:
    """Bytes one block costs on the busiest stage, layer by layer as vLLM plans it."""
    by_kind: dict[str, list[int]] = {}
    for layer, kind in enumerate(kinds):
        by_kind.setdefault(kind, []).append(layer)
    buckets = list(by_kind.values())
    if len(buckets) == 1:
        groups = buckets
    else:
        group_size = min(len(b) for b in buckets)
        if max(len(b) for b in buckets) < group_size * 1.5:
            group_size = max(len(b) for b in buckets)
        groups = []
        for layers in buckets:
            count = -(-len(layers) // group_size)
            groups.extend(layers[i::count] for i in range(count))
    worst = 0
    for rank in range(pp):
        start, end = _vllm_pp_indices(len(kinds), rank, pp, partition)
        projected = [[layer for layer in group if start <= layer < end] for group in groups]
        worst = max(worst, max(len(group) * page_bytes for group in projected))
    return worst


# A block of 16 tokens in one layer: K and V, 2 heads of 128, bf16.
PAGE_BYTES = 16 * 2 * 2 * 128 * 2
_KINDS = {
    "full": AttentionKind.FULL,
    "sliding": AttentionKind.SLIDING_WINDOW,
    "chunked": AttentionKind.CHUNKED,
}


def _geometry(kinds: list[str], pp: int, partition: tuple[int, ...] = ()) -> KvGeometry:
    """A geometry whose layers are ``kinds`` in model order, each of 2 KV heads of 128."""
    names = sorted(set(kinds))
    groups = tuple(LayerGroup(_KINDS[name], kinds.count(name), 2, 128) for name in names)
    return KvGeometry(
        groups, dtype_bytes=2, pipeline_parallel_size=pp,
        layer_order=tuple(names.index(kind) for kind in kinds), pipeline_layer_partition=partition,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("layers", "stages", "expected"),
    [
        (28, 1, (28,)),
        (28, 2, (14, 14)),
        (28, 3, (9, 10, 9)),
        (80, 3, (27, 27, 26)),
        (62, 4, (15, 16, 16, 15)),
        (48, 5, (9, 10, 10, 10, 9)),
        (3, 3, (1, 1, 1)),
    ],
)
def test_pipeline_stage_layers_split_like_vllm_get_pp_indices(
    layers: int, stages: int, expected: tuple[int, ...]
) -> None:
    assert pipeline_stage_layers(layers, stages) == expected
    bounds = tuple(_vllm_pp_indices(layers, rank, stages) for rank in range(stages))
    assert tuple(end - start for start, end in bounds) == expected


def test_pipeline_stage_layers_refuse_more_stages_than_layers() -> None:
    with pytest.raises(ValueError, match="between 1 and the 4 decoder layers"):
        pipeline_stage_layers(4, 5)


@pytest.mark.parametrize("pp", [1, 2, 3, 4, 5, 7])
@pytest.mark.parametrize(
    "kinds",
    [
        ["full"] * 28,
        ["full"] * 80,
        ["full" if (i + 1) % 6 == 0 else "sliding" for i in range(34)],  # Gemma 3 4B
        ["full" if (i + 1) % 6 == 0 else "sliding" for i in range(62)],  # Gemma 3 27B
        ["full" if (i + 1) % 4 == 0 else "chunked" for i in range(48)],  # Llama 4
        ["full" if i % 2 else "sliding" for i in range(25)],  # gpt-oss-like, 13 to 12
    ],
    ids=["dense-28", "dense-80", "gemma3-4b", "gemma3-27b", "llama4", "alternating"],
)
def test_busiest_stage_block_cost_matches_vllms_plan_layer_by_layer(
    kinds: list[str], pp: int
) -> None:
    geometry = _geometry(kinds, pp)
    groups = geometry.layer_groups
    page = PAGE_BYTES
    assert geometry.layers_per_block * page == _vllm_bytes_per_block(kinds, page, pp)
    # Every block, whichever group holds it, costs that much on the busiest stage's GPUs.
    vllm_groups = sum(geometry.allocated_layers(g) for g in groups) // geometry.layers_per_block
    assert geometry.bytes_per_token * 16 == vllm_groups * _vllm_bytes_per_block(kinds, page, pp)


def test_pipeline_parallel_of_one_changes_nothing() -> None:
    for model in ("Qwen/Qwen2.5-VL-7B-Instruct", "google/gemma-3-27b-it", "google/gemma-3-4b-it"):
        plain = load_profile(model).kv
        one = load_profile(model, ProfileOverrides(pipeline_parallel_size=1)).kv
        assert one.bytes_per_token == plain.bytes_per_token
        assert one.request_kv_bytes(12_345) == plain.request_kv_bytes(12_345)


# -- worked numbers (docs/deploy/parallelism.md) ------------------------------------------------


@pytest.mark.parametrize(
    ("model", "tp", "pp", "stages", "per_token"),
    [
        ("Qwen/Qwen2.5-VL-72B-Instruct", 1, 1, (80,), "320 KiB"),
        ("Qwen/Qwen2.5-VL-72B-Instruct", 4, 2, (40, 40), "40 KiB"),
        ("Qwen/Qwen2.5-VL-72B-Instruct", 2, 3, (27, 27, 26), "54 KiB"),
        ("Qwen/Qwen2.5-VL-7B-Instruct", 1, 3, (9, 10, 9), "20 KiB"),
        ("google/gemma-3-27b-it", 1, 2, (31, 31), "280 KiB"),
        ("google/gemma-3-27b-it", 1, 3, (21, 21, 20), "224 KiB"),
        ("Qwen/Qwen3-VL-30B-A3B-Instruct", 1, 1, (48,), "96 KiB"),
        ("Qwen/Qwen3-VL-30B-A3B-Instruct", 2, 2, (24, 24), "24 KiB"),
        ("meta-llama/Llama-4-Maverick-17B-128E-Instruct", 8, 1, (48,), "24 KiB"),
        ("meta-llama/Llama-4-Maverick-17B-128E-Instruct", 8, 2, (24, 24), "12 KiB"),
    ],
)
def test_kv_bytes_per_token_per_gpu_is_the_busiest_stages(
    model: str, tp: int, pp: int, stages: tuple[int, ...], per_token: str
) -> None:
    overrides = ProfileOverrides(tensor_parallel_size=tp, pipeline_parallel_size=pp)
    kv = load_profile(model, overrides).kv
    assert kv.stage_layers == stages
    assert format_bytes(kv.bytes_per_token) == per_token


def test_gemma3_27b_on_three_stages_pays_for_the_stage_with_four_global_layers() -> None:
    kv = load_profile("google/gemma-3-27b-it", ProfileOverrides(pipeline_parallel_size=3)).kv
    # One global group (layers 5, 11, ..., 59): stage 1 (layers 21-41) holds four of them, and
    # no sliding group holds more than three layers on any stage, so a block costs 4 pages.
    assert kv.layers_per_block == 4
    per_layer = 2 * 16 * 128 * 2
    # 10,000 tokens: 625 blocks in the global group, 65 in each of the 6 sliding groups.
    assert kv.request_kv_bytes(10_000) == (625 + 6 * 65) * 16 * 4 * per_layer


@pytest.mark.parametrize(
    ("model", "tp", "partition", "per_token"),
    [
        ("Qwen/Qwen2.5-VL-72B-Instruct", 4, (42, 38), "42 KiB"),
        ("Qwen/Qwen2.5-VL-7B-Instruct", 1, (10, 18), "36 KiB"),
    ],
)
def test_a_layer_partition_splits_the_layers_as_vllm_pp_layer_partition_does(
    model: str, tp: int, partition: tuple[int, ...], per_token: str
) -> None:
    overrides = ProfileOverrides(
        tensor_parallel_size=tp,
        pipeline_parallel_size=len(partition),
        pipeline_layer_partition=partition,
    )
    kv = load_profile(model, overrides).kv
    assert kv.stage_layers == partition
    assert format_bytes(kv.bytes_per_token) == per_token


@pytest.mark.parametrize(
    ("kinds", "partition"),
    [
        (["full" if (i + 1) % 6 == 0 else "sliding" for i in range(62)], "12,50"),  # Gemma 3 27B
        (["full" if (i + 1) % 6 == 0 else "sliding" for i in range(62)], "30,20,12"),
        (["full" if (i + 1) % 4 == 0 else "chunked" for i in range(48)], "4,44"),  # Llama 4
        (["full"] * 28, "1,27"),
    ],
)
def test_a_layer_partitions_block_cost_matches_vllms_plan_layer_by_layer(
    kinds: list[str], partition: str
) -> None:
    stages = tuple(int(count) for count in partition.split(","))
    geometry = _geometry(kinds, len(stages), stages)
    expected = _vllm_bytes_per_block(kinds, PAGE_BYTES, len(stages), partition)
    assert geometry.layers_per_block * PAGE_BYTES == expected


@pytest.mark.parametrize("partition", [(14, 15), (28,), (10, 9, 9, 0, 0)])
def test_a_layer_partition_vllm_refuses_is_a_configuration_error(
    partition: tuple[int, ...],
) -> None:
    # vLLM: "len(partitions)=... does not match pp_size" / "sum(partitions)=... does not match".
    overrides = ProfileOverrides(pipeline_parallel_size=2, pipeline_layer_partition=partition)
    with pytest.raises(ConfigurationError, match="layer partition"):
        load_profile("Qwen/Qwen2.5-VL-7B-Instruct", overrides)


def test_pipeline_parallel_beyond_the_layers_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="pipeline_parallel_size"):
        load_profile("Qwen/Qwen2-VL-2B-Instruct", ProfileOverrides(pipeline_parallel_size=29))


# -- the MoE built-ins --------------------------------------------------------------------


def test_qwen3_vl_30b_a3b_prices_images_as_qwen3_vl_and_holds_48_dense_attention_layers() -> None:
    moe = load_profile("Qwen/Qwen3-VL-30B-A3B-Instruct")
    dense = load_profile("Qwen/Qwen3-VL-8B-Instruct")
    assert moe.model_type == "qwen3_vl_moe"
    assert moe.vision == dense.vision
    assert moe.video == dense.video
    assert moe.vision.image_tokens(1920, 1080) == dense.vision.image_tokens(1920, 1080)
    assert moe.kv.bytes_per_token == 2 * 48 * 4 * 128 * 2 == 98_304
    assert moe.max_position_embeddings == 262_144
    assert moe.embedding_width == 2048
    assert moe.parameter_count == 31_070_000_000


def test_llama4_maverick_shares_scouts_attention_and_vision_with_a_1m_context() -> None:
    maverick = load_profile("meta-llama/Llama-4-Maverick-17B-128E-Instruct")
    scout = load_profile("meta-llama/Llama-4-Scout-17B-16E-Instruct")
    assert maverick.vision == scout.vision
    assert maverick.kv == scout.kv
    assert format_bytes(maverick.kv.bytes_per_token) == "192 KiB"
    assert maverick.max_position_embeddings == 1_048_576
    assert maverick.vision.max_image_tokens().tokens == 2_467
    assert maverick.parameter_count == 400_000_000_000


def test_llama4_chunked_layers_keep_their_place_in_the_layer_order() -> None:
    kv = load_profile("meta-llama/Llama-4-Maverick-17B-128E-Instruct").kv
    kinds = [kv.layer_groups[index].kind for index in kv.layer_order]
    assert [i for i, kind in enumerate(kinds) if kind is AttentionKind.FULL] == list(
        range(3, 48, 4)
    )
