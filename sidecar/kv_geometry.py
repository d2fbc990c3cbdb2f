"""KV-cache geometry and cost: what one token, and one whole request, holds in vLLM's pool.

vLLM allocates KV in blocks of ``block_size`` tokens per layer group
(``kv_cache_interface.AttentionSpec``): one token costs
``2 (K and V) x kv_heads_per_rank x head_dim x dtype_bytes`` in each layer, with
``kv_heads_per_rank = max(1, kv_heads // tensor_parallel_size)``. A request holds
``ceil(tokens / block_size)`` blocks in full-attention layers; sliding-window and chunked
layers hold at most their window; cross-attention layers hold the encoder states.
All byte counts here are per GPU.
"""

from __future__ import annotations

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

    def group_bytes_per_token(self, group: LayerGroup) -> int:
        """KV bytes one token holds in all layers of ``group``, on one GPU."""
        heads_per_rank = max(1, group.num_kv_heads // self.tensor_parallel_size)
        return 2 * group.num_layers * heads_per_rank * group.head_dim * self.dtype_bytes

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

    def request_kv_bytes(self, sequence_tokens: int, cross_attention_tokens: int = 0) -> int:
        """KV bytes one sequence of ``sequence_tokens`` holds at its longest, in whole blocks."""
        total = 0
        for group in self.layer_groups:
            per_token = self.group_bytes_per_token(group)
            if group.kind is AttentionKind.CROSS:
                held_blocks = self.blocks(cross_attention_tokens)
            elif group.kind is AttentionKind.FULL or group.window_tokens is None:
                held_blocks = self.blocks(sequence_tokens)
            else:
                # A window spans at most window/block + 1 blocks once it slides over a boundary.
                held_blocks = min(
                    self.blocks(sequence_tokens), self.blocks(group.window_tokens) + 1
                )
            total += held_blocks * self.block_size_tokens * per_token
        return total
