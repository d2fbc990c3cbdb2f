"""KV-cache geometry and cost: what one token, and one whole request, holds in vLLM's pool.

Every rule below is vLLM 0.33's V1 KV-cache manager; all byte counts are per GPU.

**Per token.** vLLM allocates KV in blocks of ``block_size`` tokens per layer
(``kv_cache_interface.AttentionSpec``): one token costs
``2 (K and V) x kv_heads_per_rank x head_dim x dtype_bytes`` in each layer, with
``kv_heads_per_rank = max(1, kv_heads // tensor_parallel_size)``. A multi-head latent
attention layer (MLA: DeepSeek-V2 / V3, Kimi; ``LayerGroup.latent``) caches one latent vector
instead, ``(kv_lora_rank + qk_rope_head_dim) x dtype_bytes``, whole on every rank
(``MLAAttentionSpec``). Its block size is the MLA backend's: 16 on Hopper (FlashAttention
MLA), 64 with an fp8 cache (FlashMLA; ``default_block_tokens``).

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

**Recurrent-state layers** (Qwen3.5's Gated DeltaNet, Nemotron-H's Mamba2, LFM2's short
convolutions): a fixed state per sequence, a conv state and (but for a short convolution) a
temporal (SSM) state whose shapes are
``MambaStateShapeCalculator``'s (``RecurrentState.shapes``), not per-token KV. vLLM's
hybrid KV-cache manager keeps them in the same pool of equal-size pages
(``platforms.interface._align_hybrid_block_size``): the attention block size is raised to
the smallest multiple of the kernel alignment (16 tokens; made a multiple of the GDN
prefill checkpoint grid, 64, where those checkpoints are exported) whose attention page
holds the state, and the state's page is padded to the attention page. Every KV-cache
group then costs one page per layer per block, so one block costs
``layers_per_block x page`` bytes (``bytes_per_block``, vLLM's
``_get_kv_cache_bytes_per_block``). A request holds, in each recurrent group, one block
with prefix caching off (``mamba_cache_mode`` ``none``), and two (the running state and
the last block-aligned checkpoint), plus one where prefill checkpoints are exported,
with it on (``align``; ``MambaSpec.max_memory_usage_bytes``): vLLM's own cap, which its
admission gate uses too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum


class AttentionKind(StrEnum):
    """How a layer's KV grows with the sequence."""

    FULL = "full_attention"
    SLIDING_WINDOW = "sliding_attention"
    CHUNKED = "chunked_attention"
    CROSS = "cross_attention"
    RECURRENT = "recurrent_state"  # linear attention / Mamba: a fixed state per sequence

    @classmethod
    def from_layer_type(cls, layer_type: str) -> AttentionKind:
        """Map a transformers ``layer_types`` entry."""
        try:
            return cls(layer_type)
        except ValueError:
            return cls.FULL


class RecurrentKind(StrEnum):
    """Which recurrent mixer a layer runs; each has its own state shapes in vLLM."""

    GATED_DELTA_NET = "gated_delta_net"  # Qwen3.5 / Qwen3-Next linear attention
    MAMBA2 = "mamba2"  # Nemotron-H, Granite 4, Falcon-H1, ...
    SHORT_CONV = "short_conv"  # LFM2's gated short convolutions: a conv state only


@dataclass(frozen=True, slots=True)
class RecurrentState:
    """One recurrent layer's per-sequence state, as vLLM 0.33's ``MambaStateShapeCalculator``
    shapes it (``gated_delta_net_state_shape``, ``mamba2_state_shape``,
    ``short_conv_state_shape``).

    Gated DeltaNet: ``num_heads`` value heads of ``head_dim``, ``num_key_heads`` key heads of
    ``state_size``. Mamba2: ``num_heads`` heads of ``head_dim``, SSM state ``state_size``,
    ``n_groups`` B/C groups. Short convolution (LFM2): a conv state of ``num_heads`` channels
    (the hidden size) only, no temporal state; ``head_dim`` and ``state_size`` are 0.
    ``ssm_dtype`` is the checkpoint's own temporal-state dtype (Qwen3.5's
    ``mamba_ssm_dtype``, Nemotron-H's ``mamba_ssm_cache_dtype``), which vLLM uses when
    ``--mamba-ssm-cache-dtype`` is ``auto``; None: the conv state's dtype.
    """

    kind: RecurrentKind
    num_heads: int
    head_dim: int
    state_size: int
    conv_kernel: int
    num_key_heads: int = 0
    n_groups: int = 0
    ssm_dtype: str | None = None

    def shapes(self, tensor_parallel_size: int) -> tuple[tuple[int, ...], ...]:
        """The conv state's shape and then the temporal state's (none for a short
        convolution) on one tensor-parallel rank; ValueError where vLLM's ``divide`` refuses
        the split."""
        tp = tensor_parallel_size
        if self.kind is RecurrentKind.SHORT_CONV:
            return ((_divide(self.num_heads, tp), self.conv_kernel - 1),)
        if self.kind is RecurrentKind.GATED_DELTA_NET:
            conv_dim = self.state_size * self.num_key_heads * 2 + self.head_dim * self.num_heads
        else:
            groups = self.n_groups + (0 if self.n_groups % tp == 0 else tp - self.n_groups)
            conv_dim = self.num_heads * self.head_dim + 2 * groups * self.state_size
        return (
            (_divide(conv_dim, tp), self.conv_kernel - 1),
            (_divide(self.num_heads, tp), self.head_dim, self.state_size),
        )

    def state_bytes(
        self, tensor_parallel_size: int, conv_dtype_bytes: int, ssm_dtype_bytes: int
    ) -> int:
        """Bytes of one sequence's state in this layer on one rank: vLLM's
        ``MambaSpec.page_size_bytes`` before padding."""
        conv, *temporal = self.shapes(tensor_parallel_size)
        return math.prod(conv) * conv_dtype_bytes + sum(
            math.prod(shape) * ssm_dtype_bytes for shape in temporal
        )


def _divide(numerator: int, denominator: int) -> int:
    if numerator % denominator:
        raise ValueError(f"{numerator} is not divisible by tensor_parallel_size {denominator}")
    return numerator // denominator


@dataclass(frozen=True, slots=True)
class LayerGroup:
    """Layers that share one attention kind and shape (``state`` for recurrent layers).

    ``latent``: multi-head latent attention (MLA: DeepSeek-V2 / V3, Kimi), which caches one
    vector of ``head_dim`` (``kv_lora_rank + qk_rope_head_dim``) per token, no separate K and
    V, whole on every tensor-parallel rank (vLLM's ``MLAAttentionSpec``: one KV head,
    ``head_size_v`` 0); ``num_kv_heads`` is then 1.
    """

    kind: AttentionKind
    num_layers: int
    num_kv_heads: int
    head_dim: int
    window_tokens: int | None = None
    state: RecurrentState | None = None
    latent: bool = False


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


# A ``layer_order`` entry for a decoder block with neither KV nor state (an MLP block).
STATELESS_LAYER = -1

_Spec = tuple[AttentionKind, int, int, int | None, RecurrentState | None, bool]


def _spec(group: LayerGroup) -> _Spec:
    """What makes two layers share a vLLM KV-cache spec."""
    return (
        group.kind,
        group.num_kv_heads,
        group.head_dim,
        group.window_tokens,
        group.state,
        group.latent,
    )


@dataclass(frozen=True, slots=True)
class _BlockLayout:
    """How vLLM lays the model's KV out in blocks, on the busiest pipeline stage."""

    groups: dict[_Spec, int]  # KV-cache groups per attention spec
    layers_per_block: int  # the busiest stage's largest group: pages one block costs
    stage_layers: tuple[int, ...]  # decoder layers per pipeline stage
    block_tokens: int  # the attention block size, raised until a page holds a recurrent state
    pages: dict[_Spec, int]  # one layer's page per block, per spec, in bytes (all equal)
    spec_block_tokens: dict[_Spec, int]  # tokens a block holds in each spec's layers


# FlashInfer's GDN prefill exports a checkpoint every this many tokens (vLLM 0.33,
# ``gdn_attn.FLASHINFER_GDN_CHECKPOINT_ALIGNMENT``); vLLM picks that kernel on Hopper.
GDN_PREFILL_CHECKPOINT_TOKENS = 64

# vLLM's attention backends on GPU (FlashAttention, FlashInfer, Triton) take blocks in
# multiples of 16 tokens: the unit the hybrid block size is raised in.
KERNEL_BLOCK_ALIGNMENT_TOKENS = 16


# vLLM's default --block-size (``CacheConfig.DEFAULT_BLOCK_SIZE``), which FlashAttention and
# FlashAttention MLA (vLLM 0.33's first choice for MLA on Hopper) take as it is.
DEFAULT_BLOCK_TOKENS = 16
# FlashMLA's only kernel block size: vLLM 0.33 picks FlashMLA on Hopper for an MLA model with an
# fp8 KV cache (FlashAttention MLA takes bf16 / fp16 caches only) and sets the block size to it
# (``Platform.update_block_size_for_backend``).
FLASHMLA_BLOCK_TOKENS = 64


def default_block_tokens(layer_groups: Sequence[LayerGroup], kv_dtype_bytes: int) -> int:
    """The block size vLLM 0.33 picks on Hopper when ``--block-size`` is not given: FlashMLA's
    64 for MLA layers with a quantized (one-byte) cache, else 16."""
    if kv_dtype_bytes == 1 and any(g.latent and g.num_layers for g in layer_groups):
        return FLASHMLA_BLOCK_TOKENS
    return DEFAULT_BLOCK_TOKENS


@dataclass(frozen=True, slots=True)
class KvGeometry:
    """The served model's KV layout on one GPU.

    ``layer_order`` gives each decoder layer, in model order, as an index into
    ``layer_groups``, or ``STATELESS_LAYER`` for a block that holds nothing (Nemotron-H's MLP
    and MoE blocks, which still take their place in vLLM's pipeline split); empty means the
    groups' layers one group after another, which is exact for a model with one attention
    kind.

    The recurrent-state fields matter only to models with ``RECURRENT`` layers:
    ``conv_state_dtype_bytes`` is ``--mamba-cache-dtype``'s element size (the model dtype for
    ``auto``), ``ssm_state_dtype_bytes`` ``--mamba-ssm-cache-dtype``'s (None: ``auto``, the
    checkpoint's own SSM dtype, else the conv state's), ``prefix_caching`` vLLM's
    ``--enable-prefix-caching`` (on by default; it selects ``mamba_cache_mode`` ``align``),
    and ``prefill_checkpoint_tokens`` the GDN prefill checkpoint grid where the layers export
    checkpoints (FlashInfer's GDN prefill, vLLM's choice on Hopper: 64), None where not.
    ``block_size_is_final``: ``block_size_tokens`` is the size vLLM reported running, its
    hybrid alignment already applied, so it is used as it is.
    """

    layer_groups: tuple[LayerGroup, ...]
    dtype_bytes: int
    tensor_parallel_size: int = 1
    block_size_tokens: int = 16
    pipeline_parallel_size: int = 1
    layer_order: tuple[int, ...] = ()
    pipeline_layer_partition: tuple[int, ...] = ()  # layers per stage; (): vLLM's default
    conv_state_dtype_bytes: int = 2
    ssm_state_dtype_bytes: int | None = None
    prefix_caching: bool = True
    prefill_checkpoint_tokens: int | None = None
    block_size_is_final: bool = False
    # The block layout, worked out on first use: every request's KV bytes read it several
    # times, and a cache keyed by the geometry would hash all of its layer groups each time.
    _layout: _BlockLayout | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def num_layers(self) -> int:
        """Decoder layers holding KV, across every pipeline stage."""
        return sum(group.num_layers for group in self.layer_groups)

    @property
    def num_decoder_layers(self) -> int:
        """Decoder layers, those that hold nothing included: what pipeline stages split."""
        return len(self.layer_order) or self.num_layers

    @property
    def stage_layers(self) -> tuple[int, ...]:
        """Decoder layers on each pipeline stage."""
        return _block_layout(self).stage_layers

    @property
    def layers_per_block(self) -> int:
        """Layers' pages one KV block costs on the busiest pipeline stage's GPUs."""
        return _block_layout(self).layers_per_block

    @property
    def block_tokens(self) -> int:
        """Tokens per attention block as vLLM runs it: ``block_size_tokens``, raised for a
        hybrid model until one attention page holds a recurrent state."""
        return _block_layout(self).block_tokens

    @property
    def bytes_per_block(self) -> int:
        """Bytes one block id costs on a GPU of the busiest stage: a page in each layer of
        the largest KV-cache group (vLLM's ``_get_kv_cache_bytes_per_block``)."""
        layout = _block_layout(self)
        return layout.layers_per_block * max(layout.pages.values(), default=0)

    @property
    def has_recurrent_state(self) -> bool:
        """Whether some layers hold a fixed state per sequence (a hybrid model)."""
        return any(g.state is not None and g.num_layers for g in self.layer_groups)

    def recurrent_state_bytes(self, state: RecurrentState) -> int:
        """One sequence's state in one layer on one rank, before page padding."""
        return state.state_bytes(
            self.tensor_parallel_size,
            self.conv_state_dtype_bytes,
            self._ssm_dtype_bytes(state),
        )

    def _ssm_dtype_bytes(self, state: RecurrentState) -> int:
        if self.ssm_state_dtype_bytes is not None:
            return self.ssm_state_dtype_bytes
        if state.ssm_dtype is not None:
            return STATE_DTYPE_BYTES[state.ssm_dtype]
        return self.conv_state_dtype_bytes

    def attention_bytes_per_token(self, group: LayerGroup) -> int:
        """KV bytes one token holds in one layer of ``group`` on one GPU."""
        if group.kind is AttentionKind.RECURRENT:
            return 0
        if group.latent:
            return group.head_dim * self.dtype_bytes  # one latent vector, every rank whole
        heads_per_rank = max(1, group.num_kv_heads // self.tensor_parallel_size)
        return 2 * heads_per_rank * group.head_dim * self.dtype_bytes

    def allocated_layers(self, group: LayerGroup) -> int:
        """Layers' worth of KV one token of ``group``'s kind costs on a GPU of the busiest
        stage: its KV-cache groups times the layers one block pays for (hybrid padding and
        the pipeline split included)."""
        layout = _block_layout(self)
        return layout.groups[_spec(group)] * layout.layers_per_block

    def group_bytes_per_token(self, group: LayerGroup) -> int:
        """KV bytes one token holds in all layers of ``group``, on one GPU (0 for
        recurrent layers, whose state does not grow with the sequence): its page over the
        tokens a block holds in it, a padded page's padding included."""
        if group.kind is AttentionKind.RECURRENT:
            return 0
        layout = _block_layout(self)
        spec = _spec(group)
        per_token = -(-layout.pages[spec] // layout.spec_block_tokens[spec])
        return self.allocated_layers(group) * per_token

    def group_block_tokens(self, group: LayerGroup) -> int:
        """Tokens one block holds in ``group``'s layers: ``block_tokens``, or a multiple of
        it where vLLM raised a smaller page to the largest (``unify_kv_cache_spec_page_size``)."""
        return _block_layout(self).spec_block_tokens[_spec(group)]

    @property
    def bytes_per_token(self) -> int:
        """KV bytes per prompt or output token across every self-attention layer, per GPU:
        what each token adds while blocks fill; recurrent states are per sequence."""
        return sum(
            self.group_bytes_per_token(g)
            for g in _distinct_specs(self.layer_groups)
            if g.kind is not AttentionKind.CROSS
        )

    def blocks(self, tokens: int) -> int:
        """Whole attention blocks that ``tokens`` occupy."""
        return -(-tokens // self.block_tokens)

    def held_blocks(
        self, group: LayerGroup, sequence_tokens: int, cross_attention_tokens: int = 0
    ) -> int:
        """Blocks one request holds in each KV-cache group of ``group``'s kind at its
        longest (rules in the module docstring)."""
        if group.kind is AttentionKind.RECURRENT:
            if not self.prefix_caching:
                return 1
            return 2 + (self.prefill_checkpoint_tokens is not None)
        block = self.group_block_tokens(group)

        def blocks(tokens: int) -> int:
            return -(-tokens // block)

        if group.kind is AttentionKind.CROSS:
            return blocks(cross_attention_tokens)
        window = group.window_tokens
        if group.kind is AttentionKind.SLIDING_WINDOW and window is not None:
            return min(blocks(sequence_tokens), blocks(window - 1) + 1)
        if group.kind is AttentionKind.CHUNKED and window is not None:
            return min(blocks(sequence_tokens), blocks(window) + 1)
        return blocks(sequence_tokens)

    def request_blocks(self, sequence_tokens: int, cross_attention_tokens: int = 0) -> int:
        """Block ids one sequence of ``sequence_tokens`` holds at its longest, every
        KV-cache group's together."""
        layout = _block_layout(self)
        return sum(
            self.held_blocks(group, sequence_tokens, cross_attention_tokens)
            * layout.groups[_spec(group)]
            for group in _distinct_specs(self.layer_groups)
        )

    def request_kv_bytes(self, sequence_tokens: int, cross_attention_tokens: int = 0) -> int:
        """KV bytes one sequence of ``sequence_tokens`` holds at its longest: whole blocks,
        each a page in every layer of its group."""
        layout = _block_layout(self)
        return sum(
            self.held_blocks(group, sequence_tokens, cross_attention_tokens)
            * layout.groups[_spec(group)]
            * layout.layers_per_block
            * layout.pages[_spec(group)]
            for group in _distinct_specs(self.layer_groups)
        )


# Element sizes of vLLM's ``MambaDType`` values (``--mamba-cache-dtype``,
# ``--mamba-ssm-cache-dtype``) and the checkpoints' own SSM dtypes.
STATE_DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}


def _distinct_specs(groups: Sequence[LayerGroup]) -> list[LayerGroup]:
    """One group per attention spec: vLLM keeps layers that share a spec together."""
    seen: dict[_Spec, LayerGroup] = {}
    for group in groups:
        if group.num_layers > 0:
            seen.setdefault(_spec(group), group)
    return list(seen.values())


def _model_attention_bytes_per_token(geometry: KvGeometry) -> int:
    """One token's KV in one attention layer, from the model's attention heads as vLLM's
    ``model_config.get_num_kv_heads`` gives them (a model whose layers are all recurrent
    still has them in its config, and vLLM sizes its pages by them)."""
    groups = [g for g in geometry.layer_groups if g.kind is not AttentionKind.CROSS]
    attention = [g for g in groups if g.kind is not AttentionKind.RECURRENT and g.num_layers]
    if attention:
        return geometry.attention_bytes_per_token(attention[0])
    reference = groups[0]
    heads_per_rank = max(1, reference.num_kv_heads // geometry.tensor_parallel_size)
    return 2 * heads_per_rank * reference.head_dim * geometry.dtype_bytes


def _hybrid_block_tokens(geometry: KvGeometry) -> int:
    """vLLM 0.33's ``Platform._align_hybrid_block_size``: the smallest multiple of the
    kernel alignment whose attention page holds the largest recurrent state."""
    block = geometry.block_size_tokens
    states = [g.state for g in geometry.layer_groups if g.state is not None and g.num_layers]
    if not states or geometry.block_size_is_final:
        return block
    state_bytes = max(geometry.recurrent_state_bytes(state) for state in states)
    per_token = _model_attention_bytes_per_token(geometry)
    alignment = max(KERNEL_BLOCK_ALIGNMENT_TOKENS, block)
    if geometry.prefix_caching and geometry.prefill_checkpoint_tokens is not None:
        alignment = math.lcm(alignment, geometry.prefill_checkpoint_tokens)
    needed = alignment * -(-state_bytes // (alignment * per_token))
    needed = KERNEL_BLOCK_ALIGNMENT_TOKENS * -(-needed // KERNEL_BLOCK_ALIGNMENT_TOKENS)
    return max(block, needed)


def _pages(geometry: KvGeometry, block_tokens: int) -> tuple[dict[_Spec, int], dict[_Spec, int]]:
    """One layer's page per block for each spec, and the tokens a block holds in it.

    Attention pages hold ``block_tokens`` tokens; a recurrent state's page is padded to the
    attention page. Where attention layers differ in page (Gemma 4's global layers: a larger
    head, fewer KV heads), vLLM 0.33 makes every page the largest
    (``unify_kv_cache_spec_page_size``): a page that divides it holds that many times more
    tokens per block, any other is padded to it.
    """
    pages = {
        _spec(g): block_tokens * geometry.attention_bytes_per_token(g)
        for g in geometry.layer_groups
        if g.kind is not AttentionKind.RECURRENT and g.num_layers
    }
    for group in geometry.layer_groups:
        if group.state is not None and group.num_layers:
            pages[_spec(group)] = block_tokens * _model_attention_bytes_per_token(geometry)
    largest = max(pages.values(), default=0)
    spec_block_tokens = {}
    for spec, page in pages.items():
        ratio = largest // page if page and largest % page == 0 else 1
        if spec[4] is not None:
            ratio = 1  # a state's page does not grow with the block: padded instead
        spec_block_tokens[spec] = block_tokens * ratio
        pages[spec] = largest
    return pages, spec_block_tokens


def _block_layout(geometry: KvGeometry) -> _BlockLayout:
    """vLLM's KV-cache groups and the pipeline split, worked out once per geometry."""
    layout = geometry._layout
    if layout is None:
        layout = _work_out_layout(geometry)
        object.__setattr__(geometry, "_layout", layout)  # frozen: set once, never changed
    return layout


def _work_out_layout(geometry: KvGeometry) -> _BlockLayout:
    order = geometry.layer_order or tuple(
        index for index, group in enumerate(geometry.layer_groups) for _ in range(group.num_layers)
    )
    positions: dict[_Spec, list[int]] = {}
    for position, index in enumerate(order):
        if index != STATELESS_LAYER:
            positions.setdefault(_spec(geometry.layer_groups[index]), []).append(position)
    stage_layers = pipeline_stage_layers(
        max(1, len(order)), geometry.pipeline_parallel_size, geometry.pipeline_layer_partition
    )
    block_tokens = _hybrid_block_tokens(geometry)
    pages, spec_block_tokens = _pages(geometry, block_tokens)
    if not positions:
        return _BlockLayout({}, 0, stage_layers, block_tokens, pages, spec_block_tokens)
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
    return _BlockLayout(
        groups, layers_per_block, stage_layers, block_tokens, pages, spec_block_tokens
    )
