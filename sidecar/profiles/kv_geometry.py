"""KV-cache geometry and cost: what one token, and one whole request, holds in vLLM's pool.

Every rule below is vLLM 0.33's V1 KV-cache manager; all byte counts are per GPU.

**Per token.** vLLM allocates KV in blocks of ``block_size`` tokens per layer
(``kv_cache_interface.AttentionSpec``): one token costs
``2 (K and V) x kv_heads_per_rank x head_dim x dtype_bytes`` in each layer, with
``kv_heads_per_rank = max(1, kv_heads // tensor_parallel_size)``.

**Hybrid padding.** A model that mixes attention kinds (Gemma 3: sliding and full; Llama 3.2
Vision: self- and cross-attention) is split into KV-cache groups of equal size, and each kind
is padded up to whole groups (``kv_cache_utils._get_kv_cache_groups_uniform_page_size``). The
group size is the smallest kind's layer count, or the largest's when that is under 1.5 times
the smallest. One block id spans a page in each of ``group_size`` layers, so a padded group
costs whole pages: Gemma 3 27B's 52 sliding layers fill 6 groups of 10, the KV of 60 layers.
``allocated_layers`` is that count; a model with one kind has one group and no padding.

**Blocks one request holds** (``request_kv_bytes``), per kind, for a sequence of ``n`` tokens
and blocks of ``B``:

- full attention: ``ceil(n / B)``, every token until the request ends (``FullAttentionSpec``).
- sliding window ``W``: ``min(ceil(n / B), ceil((W - 1) / B) + 1)``, the steady state. Before
  each step ``SlidingWindowManager.remove_skipped_blocks`` frees the blocks wholly before token
  ``n - W + 1``; the last ``W - 1`` tokens and the new one then span at most that many blocks,
  one more than the window when it starts mid-block. While a prefill chunk of ``c`` tokens
  runs, a request briefly holds up to ``ceil((W - 1 + c) / B) + 1`` blocks
  (``SlidingWindowSpec.max_memory_usage_bytes``; vLLM's admission gate checks free blocks
  against that cap). We price the steady state because the surplus belongs to the step, not
  to the request: the chunks of one step total at most ``max_num_batched_tokens``, so the
  surplus is a fixed headroom of the pool, ``ceil(max_num_batched_tokens / B)`` blocks per
  sliding group at most. Pricing every in-flight request at its prefill peak would count that
  headroom once per request.
- chunked local attention ``C`` (Llama 4): ``min(ceil(n / B), ceil(C / B) + 1)``. vLLM frees
  the blocks before the current chunk's start, so it holds ``ceil(C / B)`` when ``B`` divides
  ``C``; the extra block is a conservative margin. Recent vLLM disables the hybrid manager
  for chunked local attention unless ``VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1``,
  and then these layers hold every token like full attention.
- cross-attention: ``ceil(encoder_tokens / B)``, the encoder states, whatever the prompt
  length (``CrossAttentionSpec``).

With the hybrid manager off (``--disable-hybrid-kv-cache-manager``, KV connectors) vLLM keeps
one group and holds every token in sliding layers too; these rules assume it is on, vLLM's
default for sliding-window models.

**Pipeline parallelism.** ``--pipeline-parallel-size P`` gives each stage a run of consecutive
decoder layers (``distributed.utils.get_pp_indices``: ``L // P`` each, the ``L % P`` left over
go one each to the stages before the last, last-but-one first; or the counts of
``VLLM_PP_LAYER_PARTITION``, which ``SIDECAR_PIPELINE_LAYER_PARTITION`` mirrors). vLLM still
forms its KV-cache groups from the whole model's layers
(``kv_cache_planning.get_global_kv_cache_groups``; a kind of ``n`` layers in ``g`` groups puts
layers ``i, i + g, ...`` of that kind in group ``i``) and then keeps, on each stage, only the
layers it holds (``_project_kv_cache_groups_to_worker``).
Block ids are shared by every group and every stage, so one block costs, on stage ``s``, the
pages of the largest group's layers on ``s``; every stage gets the smallest stage's block count.
The per-GPU figures here are the busiest stage's: the one whose block costs the most.
Without pipeline parallelism that is the group size, and nothing changes.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum


class AttentionKind(StrEnum):
    """How a layer's KV grows with the sequence."""

    FULL = "full_attention"
    SLIDING_WINDOW = "sliding_attention"
    CHUNKED = "chunked_attention"
    CROSS = "cross_attention"

    @classmethod
    def from_layer_type(cls, layer_type: str) -> AttentionKind:
        """Map a transformers ``layer_types`` entry."""
        try:
            return cls(layer_type)
        except ValueError:
            return cls.FULL


@dataclass(frozen=True, slots=True)
class LayerGroup:
    """Layers that share one attention kind and shape."""

    kind: AttentionKind
    num_layers: int
    num_kv_heads: int
    head_dim: int
    window_tokens: int | None = None


def pipeline_stage_layers(
    num_layers: int, pipeline_parallel_size: int, partition: Sequence[int] = ()
) -> tuple[int, ...]:
    """Decoder layers on each pipeline stage, as vLLM 0.33's ``get_pp_indices`` assigns them:
    ``partition`` when given (vLLM's ``VLLM_PP_LAYER_PARTITION``, one count per stage), else
    vLLM's default split; ValueError where vLLM refuses to start."""
    if pipeline_parallel_size < 1 or pipeline_parallel_size > num_layers:
        raise ValueError(
            f"pipeline_parallel_size must be between 1 and the {num_layers} decoder layers, "
            f"not {pipeline_parallel_size}"
        )
    if partition:
        if len(partition) != pipeline_parallel_size or sum(partition) != num_layers:
            raise ValueError(
                f"the layer partition {','.join(map(str, partition))} must give each of the "
                f"{pipeline_parallel_size} pipeline stages its layers, {num_layers} in all"
            )
        return tuple(partition)
    partitions = [num_layers // pipeline_parallel_size] * pipeline_parallel_size
    for i in range(2, num_layers % pipeline_parallel_size + 2):
        partitions[-i] += 1
    return tuple(partitions)


_Spec = tuple[AttentionKind, int, int, int | None]


def _spec(group: LayerGroup) -> _Spec:
    """What makes two layers share a vLLM KV-cache spec."""
    return group.kind, group.num_kv_heads, group.head_dim, group.window_tokens


@dataclass(frozen=True, slots=True)
class _BlockLayout:
    """How vLLM lays the model's KV out in blocks, on the busiest pipeline stage."""

    groups: dict[_Spec, int]  # KV-cache groups per attention spec
    layers_per_block: int  # the busiest stage's largest group: pages one block costs
    stage_layers: tuple[int, ...]  # decoder layers per pipeline stage


@dataclass(frozen=True, slots=True)
class KvGeometry:
    """The served model's KV layout on one GPU.

    ``layer_order`` gives each decoder layer, in model order, as an index into
    ``layer_groups``; empty means the groups' layers one group after another, which is
    exact for a model with one attention kind.
    """

    layer_groups: tuple[LayerGroup, ...]
    dtype_bytes: int
    tensor_parallel_size: int = 1
    block_size_tokens: int = 16
    pipeline_parallel_size: int = 1
    layer_order: tuple[int, ...] = ()
    pipeline_layer_partition: tuple[int, ...] = ()  # layers per stage; (): vLLM's default

    @property
    def num_layers(self) -> int:
        """Decoder layers holding KV, across every pipeline stage."""
        return sum(group.num_layers for group in self.layer_groups)

    @property
    def stage_layers(self) -> tuple[int, ...]:
        """Decoder layers on each pipeline stage."""
        return _block_layout(self).stage_layers

    @property
    def layers_per_block(self) -> int:
        """Layers' pages one KV block costs on the busiest pipeline stage's GPUs."""
        return _block_layout(self).layers_per_block

    def allocated_layers(self, group: LayerGroup) -> int:
        """Layers' worth of KV one token of ``group``'s kind costs on a GPU of the busiest
        stage: its KV-cache groups times the layers one block pays for (hybrid padding and
        the pipeline split included)."""
        layout = _block_layout(self)
        return layout.groups[_spec(group)] * layout.layers_per_block

    def group_bytes_per_token(self, group: LayerGroup) -> int:
        """KV bytes one token holds in all layers of ``group``, on one GPU."""
        heads_per_rank = max(1, group.num_kv_heads // self.tensor_parallel_size)
        layers = self.allocated_layers(group)
        return 2 * layers * heads_per_rank * group.head_dim * self.dtype_bytes

    @property
    def bytes_per_token(self) -> int:
        """KV bytes per prompt or output token across every self-attention layer, per GPU."""
        return sum(
            self.group_bytes_per_token(g)
            for g in _distinct_specs(self.layer_groups)
            if g.kind is not AttentionKind.CROSS
        )

    def blocks(self, tokens: int) -> int:
        """Whole blocks that ``tokens`` occupy."""
        return -(-tokens // self.block_size_tokens)

    def held_blocks(
        self, group: LayerGroup, sequence_tokens: int, cross_attention_tokens: int = 0
    ) -> int:
        """Blocks one request holds in ``group`` at its longest (rules in the module docstring)."""
        if group.kind is AttentionKind.CROSS:
            return self.blocks(cross_attention_tokens)
        window = group.window_tokens
        if group.kind is AttentionKind.SLIDING_WINDOW and window is not None:
            return min(self.blocks(sequence_tokens), self.blocks(window - 1) + 1)
        if group.kind is AttentionKind.CHUNKED and window is not None:
            return min(self.blocks(sequence_tokens), self.blocks(window) + 1)
        return self.blocks(sequence_tokens)

    def request_kv_bytes(self, sequence_tokens: int, cross_attention_tokens: int = 0) -> int:
        """KV bytes one sequence of ``sequence_tokens`` holds at its longest, in whole blocks."""
        return sum(
            self.held_blocks(group, sequence_tokens, cross_attention_tokens)
            * self.block_size_tokens
            * self.group_bytes_per_token(group)
            for group in _distinct_specs(self.layer_groups)
        )


def _distinct_specs(groups: Sequence[LayerGroup]) -> list[LayerGroup]:
    """One group per attention spec: vLLM keeps layers that share a spec together."""
    seen: dict[_Spec, LayerGroup] = {}
    for group in groups:
        if group.num_layers > 0:
            seen.setdefault(_spec(group), group)
    return list(seen.values())


@functools.lru_cache(maxsize=64)
def _block_layout(geometry: KvGeometry) -> _BlockLayout:
    """vLLM's KV-cache groups and the pipeline split, worked out once per geometry."""
    order = geometry.layer_order or tuple(
        index for index, group in enumerate(geometry.layer_groups) for _ in range(group.num_layers)
    )
    positions: dict[_Spec, list[int]] = {}
    for position, index in enumerate(order):
        positions.setdefault(_spec(geometry.layer_groups[index]), []).append(position)
    stage_layers = pipeline_stage_layers(
        max(1, len(order)), geometry.pipeline_parallel_size, geometry.pipeline_layer_partition
    )
    if not positions:
        return _BlockLayout({}, 0, stage_layers)
    counts = [len(layers) for layers in positions.values()]
    group_size = max(counts)
    if len(counts) > 1 and 2 * max(counts) >= 3 * min(counts):
        group_size = min(counts)  # _get_kv_cache_groups_uniform_page_size
    groups: dict[_Spec, int] = {}
    members: list[list[int]] = []
    for spec, layers in positions.items():
        count = groups[spec] = -(-len(layers) // group_size)
        members.extend(layers[i::count] for i in range(count))
    starts = [sum(stage_layers[:stage]) for stage in range(len(stage_layers))]
    layers_per_block = max(
        sum(1 for position in group if start <= position < start + size)
        for start, size in zip(starts, stage_layers, strict=True)
        for group in members
    )
    return _BlockLayout(groups, layers_per_block, stage_layers)
