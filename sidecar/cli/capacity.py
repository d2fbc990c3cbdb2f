"""The capacity worksheet: tokens per request, KV in flight, and whether it fits the GPUs.

It follows the design brief's worksheet:

1. tokens per request = images x (tokens per image + wrapper tokens) + text + output
2. KV tokens in flight = tokens per request x concurrency
3. KV bytes = whole blocks per request x bytes per block x concurrency

and the fit: KV pool per GPU = GPU memory x gpu_memory_utilization - weights per GPU -
fixed overhead per GPU, in the whole blocks vLLM carves it into (``num_gpu_blocks``). A
block is a page in each layer of a KV-cache group (``KvGeometry.bytes_per_block``): for a
hybrid model (Qwen3.5, Nemotron-H) a request holds attention blocks for its tokens plus a
fixed few blocks per recurrent-state group, so its KV is not tokens x a per-token figure.
Every figure is per GPU when the model is split by tensor parallelism, since that is where
memory runs out.

Pipeline parallelism gives each stage a share of the decoder layers (``KvGeometry``): the
figures are the busiest stage's, whose GPUs hold the most layers' weights and pay the most
per KV block, so it is the stage that runs out first (vLLM gives every stage the smallest
stage's block count). Its weights are the model's times its share of the layers; the
embeddings and the vision tower, which vLLM keeps on the first and last stages, are not
counted apart. Data parallelism runs ``data_parallel_size`` engines, each with the whole
model and its own pool: ``concurrency`` is the pod's, spread evenly over the engines, the
in-flight rows are one engine's, and the largest concurrency is the pod's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sidecar.errors import ConfigurationError
from sidecar.profiles import ModelProfile
from sidecar.profiles.kv_geometry import KvGeometry

GIB = 2**30
# The Qwen model card's recommended upper bound, 1280 * 28 * 28: the brief's "capped" case.
DEFAULT_CAPPED_MAX_PIXELS = 1_003_520


@dataclass(frozen=True, slots=True)
class Workload:
    """What one request carries and how many run at once."""

    images_per_request: int
    image_width_px: int
    image_height_px: int
    text_tokens: int
    output_tokens: int
    concurrency: int


@dataclass(frozen=True, slots=True)
class Hardware:
    """The GPUs the model is served on."""

    gpu_memory_gib: float
    gpu_count: int = 1
    gpu_memory_utilization: float = 0.92
    overhead_gib_per_gpu: float = 1.5
    weights_gib: float | None = None  # defaults to parameters x model dtype bytes
    max_num_batched_tokens: int | None = None  # defaults to vLLM's choice by GPU memory
    pipeline_parallel_size: int = 1  # stages, each on gpu_count tensor-parallel GPUs
    data_parallel_size: int = 1  # engines, each on gpu_count x pipeline_parallel_size GPUs

    @property
    def total_gpus(self) -> int:
        """Every GPU the deployment uses: TP x PP x DP."""
        return self.gpu_count * self.pipeline_parallel_size * self.data_parallel_size


@dataclass(frozen=True, slots=True)
class PlanRow:
    """The worksheet for one image size under one ``max_pixels`` setting."""

    label: str
    max_pixels: int | None
    image_tokens: int
    wrapper_tokens: int
    tokens_per_request: int
    kv_tokens_in_flight: int
    kv_bytes_per_request: int
    kv_bytes_in_flight: int
    fits: bool
    max_concurrency: int
    warnings: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Plan:
    """The whole worksheet."""

    model: str
    kv_bytes_per_token: int  # what each token adds; a hybrid's recurrent state is per request
    weights_bytes_per_gpu: int
    kv_pool_bytes_per_gpu: int
    encoder_cache_bytes: int
    rows: tuple[PlanRow, ...]
    stage_layers: tuple[int, ...] = ()  # decoder layers per pipeline stage
    data_parallel_size: int = 1
    # What SIDECAR_KV_BUDGET_BYTES=auto comes to: every engine's pool, in per-GPU bytes.
    auto_kv_budget_bytes: int = 0
    kv_block_tokens: int = 16  # vLLM's block size, raised for a hybrid model's state
    kv_bytes_per_block: int = 0  # per GPU


def default_max_num_batched_tokens(gpu_memory_gib: float) -> int:
    """vLLM 0.33's OpenAI-server default for H100-class and larger GPUs (A100 aside)."""
    if gpu_memory_gib >= 160:
        return 16384
    if gpu_memory_gib >= 70:
        return 8192
    return 2048


def weights_bytes(profile: ModelProfile, hardware: Hardware) -> int:
    """Model weight bytes on all GPUs together."""
    if hardware.weights_gib is not None:
        return round(hardware.weights_gib * GIB)
    if profile.parameter_count is None:
        raise ConfigurationError(
            f"the parameter count of {profile.name} is unknown; pass --weights-gib"
        )
    return profile.parameter_count * profile.model_dtype_bytes


def weights_bytes_per_gpu(profile: ModelProfile, hardware: Hardware) -> int:
    """Weights on one GPU of the busiest pipeline stage: its share of the layers, over TP."""
    kv = replace(profile.kv, pipeline_parallel_size=hardware.pipeline_parallel_size)
    layers = max(1, kv.num_decoder_layers)
    return weights_bytes(profile, hardware) * max(kv.stage_layers) // (layers * hardware.gpu_count)


def kv_pool_bytes_per_gpu(profile: ModelProfile, hardware: Hardware) -> int:
    """What vLLM leaves for the KV cache on each GPU, in the whole blocks it allocates
    (``available // bytes_per_block`` of them); negative when the weights do not fit."""
    budget = hardware.gpu_memory_gib * hardware.gpu_memory_utilization * GIB
    weights = weights_bytes_per_gpu(profile, hardware)
    available = int(budget - weights - hardware.overhead_gib_per_gpu * GIB)
    block = served_kv(profile, hardware).bytes_per_block
    if available <= 0 or block <= 0:
        return available
    return available // block * block


def served_kv(profile: ModelProfile, hardware: Hardware) -> KvGeometry:
    """The profile's KV geometry on ``hardware``'s tensor and pipeline parallel split."""
    return replace(
        profile.kv,
        tensor_parallel_size=hardware.gpu_count,
        pipeline_parallel_size=hardware.pipeline_parallel_size,
    )


def encoder_cache_bytes(profile: ModelProfile, hardware: Hardware) -> int:
    """vLLM's encoder cache: max(max_num_batched_tokens, largest item) embeddings."""
    batched = hardware.max_num_batched_tokens or default_max_num_batched_tokens(
        hardware.gpu_memory_gib
    )
    embeddings = max(batched, profile.vision.max_image_tokens().tokens)
    return embeddings * profile.embedding_width * profile.model_dtype_bytes


def plan_row(
    profile: ModelProfile,
    workload: Workload,
    pool_bytes: int,
    *,
    label: str,
    data_parallel_size: int = 1,
) -> PlanRow:
    """Apply the worksheet to one profile (one pixel setting) and one image size: in flight
    on one engine's GPUs, the largest concurrency over all ``data_parallel_size`` engines."""
    cost = profile.vision.image_tokens(workload.image_width_px, workload.image_height_px)
    tokens_per_request = (
        workload.images_per_request * cost.prompt_tokens
        + workload.text_tokens
        + workload.output_tokens
    )
    per_request = profile.kv.request_kv_bytes(
        tokens_per_request, workload.images_per_request * cost.cross_attention_tokens
    )
    per_engine = -(-workload.concurrency // max(1, data_parallel_size))
    in_flight = per_request * per_engine
    max_pixels = getattr(profile.vision, "max_pixels", None)
    per_engine_concurrency = max(0, pool_bytes) // per_request if per_request else 0
    return PlanRow(
        label=label,
        max_pixels=max_pixels if isinstance(max_pixels, int) else None,
        image_tokens=cost.tokens,
        wrapper_tokens=cost.wrapper_tokens,
        tokens_per_request=tokens_per_request,
        kv_tokens_in_flight=tokens_per_request * per_engine,
        kv_bytes_per_request=per_request,
        kv_bytes_in_flight=in_flight,
        fits=0 < in_flight <= pool_bytes,
        max_concurrency=per_engine_concurrency * max(1, data_parallel_size),
        warnings=context_warnings(profile, tokens_per_request),
    )


def context_warnings(profile: ModelProfile, tokens_per_request: int) -> tuple[str, ...]:
    """Warn when a request outgrows the validated context or the position limit."""
    warnings = []
    validated = profile.validated_context_tokens
    if validated is not None and tokens_per_request > validated:
        warnings.append(
            f"{tokens_per_request:,} tokens per request exceed the {validated:,}-token context "
            f"{profile.name} was validated for without YaRN; set --max-model-len {validated} "
            f"or enable YaRN deliberately"
        )
    if profile.max_position_embeddings and tokens_per_request > profile.max_position_embeddings:
        warnings.append(
            f"{tokens_per_request:,} tokens per request exceed the model's position limit of "
            f"{profile.max_position_embeddings:,}; vLLM will refuse these requests"
        )
    return tuple(warnings)


def make_plan(
    profile: ModelProfile,
    workloads: list[tuple[str, Workload]],
    hardware: Hardware,
    *,
    capped_max_pixels: int = DEFAULT_CAPPED_MAX_PIXELS,
) -> Plan:
    """The worksheet for each labelled workload, uncapped and capped side by side."""
    kv = served_kv(profile, hardware)
    served = replace(profile, kv=kv)
    capped = replace(served, vision=served.vision.with_pixel_range(None, capped_max_pixels))
    pool = kv_pool_bytes_per_gpu(profile, hardware)
    dp = hardware.data_parallel_size
    rows = []
    for label, workload in workloads:
        rows.append(
            plan_row(served, workload, pool, label=f"{label} uncapped", data_parallel_size=dp)
        )
        if capped.vision != served.vision:
            rows.append(
                plan_row(capped, workload, pool, label=f"{label} capped", data_parallel_size=dp)
            )
    return Plan(
        model=profile.name,
        kv_bytes_per_token=kv.bytes_per_token,
        weights_bytes_per_gpu=weights_bytes_per_gpu(profile, hardware),
        kv_pool_bytes_per_gpu=pool,
        encoder_cache_bytes=encoder_cache_bytes(profile, hardware),
        rows=tuple(rows),
        stage_layers=kv.stage_layers,
        data_parallel_size=dp,
        auto_kv_budget_bytes=max(0, pool) * dp,
        kv_block_tokens=kv.block_tokens,
        kv_bytes_per_block=kv.bytes_per_block,
    )
