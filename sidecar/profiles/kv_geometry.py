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
"""

from __future__ import annotations

from collections import Counter
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


@dataclass(frozen=True, slots=True)
class KvGeometry:
    """The served model's KV layout on one GPU."""

    layer_groups: tuple[LayerGroup, ...]
    dtype_bytes: int
    tensor_parallel_size: int = 1
    block_size_tokens: int = 16

    def allocated_layers(self, group: LayerGroup) -> int:
        """Layers' worth of KV vLLM reserves for ``group``, hybrid padding included."""
        counts = Counter[tuple[AttentionKind, int, int, int | None]]()
        for g in self.layer_groups:
            if g.num_layers > 0:
                counts[g.kind, g.num_kv_heads, g.head_dim, g.window_tokens] += g.num_layers
        if len(counts) < 2:
            return group.num_layers
        smallest, largest = min(counts.values()), max(counts.values())
        group_size = largest if 2 * largest < 3 * smallest else smallest
        return -(-group.num_layers // group_size) * group_size

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
            for g in self.layer_groups
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
            for group in self.layer_groups
        )
