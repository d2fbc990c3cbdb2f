"""Every ``SIDECAR_*`` environment variable, read once into one immutable object.

Nothing else in the package reads the environment: ``__main__`` builds ``Settings()`` and
passes it down, and tests build ``Settings(...)`` directly. Sizes accept ``512MiB`` or
``2GiB`` (pydantic ``ByteSize``); an invalid value stops start-up with a message that
names the variable.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    ByteSize,
    Field,
    HttpUrl,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    StringConstraints,
    field_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

# vLLM 0.33's MambaDType and --gdn-prefill-backend choices ("auto": vLLM's unset default).
MambaDType = Literal["auto", "float32", "float16", "bfloat16"]
GdnPrefillBackend = Literal["auto", "flashinfer", "triton", "cutedsl", "aiter_flydsl", "sycl"]

# vLLM's VLLM_MAX_IMAGE_PIXELS default (vllm/envs.py), Pillow's decompression-bomb limit
# (2 x Image.MAX_IMAGE_PIXELS): vLLM refuses a larger image as it loads it
# (vllm/multimodal/media/image.py ImageMediaIO.load_bytes), whatever the model.
VLLM_MAX_IMAGE_PIXELS = 178_956_970

ENV_PREFIX = "SIDECAR_"
Port = Annotated[int, Field(ge=0, le=65535)]
AutoKvBudget = Annotated[str, StringConstraints(pattern=r"^auto(:(0?\.\d+|1(\.0*)?))?$")]


def parse_objective_priorities(text: str) -> dict[str, int]:
    """``chat=10,default=0,batch=-1`` as a mapping; raises ``ValueError`` naming the item."""
    priorities: dict[str, int] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, value = item.partition("=")
        name = name.strip()
        try:
            if not sep or not name:
                raise ValueError
            priorities[name] = int(value.strip())
        except ValueError:
            raise ValueError(f"expected OBJECTIVE=INTEGER, got {item!r}") from None
    return priorities


class Mode(StrEnum):
    """``enforce`` acts on decisions; ``shadow`` only predicts, records and labels."""

    ENFORCE = "enforce"
    SHADOW = "shadow"


class RoutePolicy(StrEnum):
    """What to do with requests to a kind of route the sidecar does not price."""

    REJECT = "reject"
    PASS = "pass"  # noqa: S105 - a policy name, not a password


class OverBudgetAction(StrEnum):
    """What to do with a request whose images break a per-image or per-request budget."""

    REJECT = "reject"
    DOWNSCALE = "downscale"


class TenantInLog(StrEnum):
    """How the traffic log records a request's tenant."""

    HASH = "hash"
    AS_SENT = "as_sent"


class DownscaleMethod(StrEnum):
    """``resize`` rewrites the image bytes; ``processor_kwargs`` asks vLLM to resize."""

    RESIZE = "resize"
    PROCESSOR_KWARGS = "processor_kwargs"


class RemoteImages(StrEnum):
    """How http(s) image URLs are priced."""

    ASSUME_MAX = "assume_max"
    PROBE = "probe"
    REJECT = "reject"


class Pricing(StrEnum):
    """Where an image's tokens come from: the native rule, vLLM's own count, or the rule
    where the family has one and vLLM otherwise."""

    RULE = "rule"
    ENGINE = "engine"
    AUTO = "auto"


class RuleMismatch(StrEnum):
    """What a failed self-check does: warn and keep the rule, price through vLLM instead,
    or stay not ready (enforce mode only: shadow never breaks traffic)."""

    WARN = "warn"
    ENGINE = "engine"
    REFUSE = "refuse"


class LogFormat(StrEnum):
    """``auto`` is JSON unless stderr is a terminal."""

    AUTO = "auto"
    JSON = "json"
    CONSOLE = "console"


class Settings(BaseSettings):
    """The sidecar's whole configuration."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, frozen=True, extra="ignore", populate_by_name=True
    )

    # Where it listens and forwards.
    upstream_url: HttpUrl = Field(
        HttpUrl("http://127.0.0.1:8000"), description="vLLM's OpenAI-compatible server."
    )
    listen_host: str = Field("0.0.0.0", description="Address for traffic and metrics.")  # noqa: S104 - a sidecar must be reachable from the pod network
    port: Port = Field(8080, description="Traffic port; 0 picks a free one.")
    metrics_port: Port = Field(9090, description="Metrics and health port; 0 picks a free one.")
    mode: Mode = Field(Mode.ENFORCE, description="enforce, or shadow to only observe.")
    admin_routes: RoutePolicy = Field(
        RoutePolicy.REJECT,
        description=(
            "vLLM's admin routes (/sleep, /pause, /collective_rpc, LoRA loading, ...): "
            "reject (403), or pass them through."
        ),
    )
    unknown_routes: RoutePolicy = Field(
        RoutePolicy.REJECT,
        description=(
            "A POST, PUT, PATCH or DELETE to a path vLLM 0.33 does not serve, or to one the "
            "sidecar cannot price: reject (404), or pass it through unpriced."
        ),
    )

    # The served model and the vLLM flags that change the prediction.
    model: str = Field(description="Hugging Face id of a built-in profile, or a model directory.")
    min_pixels: PositiveInt | None = Field(None, description="vLLM --mm-processor-kwargs.")
    max_pixels: PositiveInt | None = Field(None, description="vLLM --mm-processor-kwargs.")
    mm_processor_kwargs: dict[str, Any] = Field(
        default_factory=dict,
        description=(
            "vLLM --mm-processor-kwargs, the same JSON object: each family's knobs "
            "(max_soft_tokens, max_dynamic_patch, min/max_pixels, ...) change the prediction; "
            "a knob the sidecar cannot price for the model stops start-up."
        ),
    )
    kv_cache_dtype: str = Field("auto", description="vLLM --kv-cache-dtype.")
    mamba_cache_dtype: MambaDType = Field(
        "auto",
        description=(
            "vLLM --mamba-cache-dtype: the recurrent (Gated DeltaNet, Mamba2) layers' conv and "
            "SSM state; auto: the model dtype."
        ),
    )
    mamba_ssm_cache_dtype: MambaDType = Field(
        "auto",
        description=(
            "vLLM --mamba-ssm-cache-dtype: the SSM state alone; auto: the checkpoint's own "
            "(Qwen3.5's mamba_ssm_dtype, Nemotron-H's float32), else the conv state's."
        ),
    )
    prefix_caching: bool = Field(
        True,
        description=(
            "vLLM --enable-prefix-caching (on by default): a hybrid model then keeps a "
            "block-aligned state checkpoint per recurrent group (mamba_cache_mode align). "
            "Read from vllm:cache_config_info once vLLM reports it."
        ),
    )
    gdn_prefill_backend: GdnPrefillBackend = Field(
        "auto",
        description=(
            "vLLM --gdn-prefill-backend: flashinfer (vLLM's auto choice on Hopper) exports "
            "prefill checkpoints, one more block per Gated DeltaNet group on a 64-token grid; "
            "auto assumes it until vLLM's block size says otherwise."
        ),
    )
    tensor_parallel_size: PositiveInt = Field(1, description="vLLM --tensor-parallel-size.")
    pipeline_parallel_size: PositiveInt = Field(
        1,
        description=(
            "vLLM --pipeline-parallel-size: decoder layers are split across stages as vLLM "
            "splits them, and KV figures are the busiest stage's, per GPU."
        ),
    )
    pipeline_layer_partition: Annotated[tuple[NonNegativeInt, ...], NoDecode] = Field(
        (),
        description=(
            "vLLM's VLLM_PP_LAYER_PARTITION: decoder layers per pipeline stage, comma-separated "
            "(e.g. 13,15), one count per stage; unset: vLLM's default split."
        ),
    )
    data_parallel_size: PositiveInt = Field(
        1,
        description=(
            "vLLM --data-parallel-size: engines in the pod, each with its own KV pool; an "
            "auto budget covers them all, one request must fit one engine's."
        ),
    )
    trust_request_mm_kwargs: bool = Field(
        False,
        description=(
            "vLLM --trust-request-mm-kwargs: price with a request's mm_processor_kwargs; "
            "false refuses them as vLLM does."
        ),
    )
    trust_request_chat_template: bool = Field(
        False,
        description=(
            "vLLM --trust-request-chat-template: count with a request's chat_template; false "
            "refuses it as vLLM does."
        ),
    )
    block_size_tokens: PositiveInt | None = Field(
        None,
        # SIDECAR_BLOCK_SIZE is the name from before the setting carried its unit.
        validation_alias=AliasChoices("SIDECAR_BLOCK_SIZE_TOKENS", "SIDECAR_BLOCK_SIZE"),
        description=(
            "vLLM --block-size, in tokens: KV is allocated in whole blocks. Unset: the "
            "block_size vLLM reports in vllm:cache_config_info (16 until it is read; vLLM's "
            "CPU and some GPU attention backends choose their own)."
        ),
    )

    # Per-image and per-request budgets; unset means unlimited.
    max_images_per_request: PositiveInt | None = Field(None, description="Images per request.")
    max_image_pixels: PositiveInt | None = Field(None, description="Pixels of one image.")
    max_image_tokens: PositiveInt | None = Field(None, description="Visual tokens of one image.")
    max_request_visual_tokens: PositiveInt | None = Field(None, description="All images.")
    max_request_prompt_tokens: PositiveInt | None = Field(
        None, description="Whole prompt; defaults to the model's context length."
    )
    max_request_kv_bytes: ByteSize | None = Field(None, description="KV of one request.")
    max_decode_pixels: PositiveInt = Field(
        VLLM_MAX_IMAGE_PIXELS, description="Hard limit: larger headers are refused, never decoded."
    )
    max_body_bytes: ByteSize = Field(ByteSize(64 * 2**20), description="Request body limit.")
    max_request_parts: PositiveInt = Field(
        10_000,
        description="Messages, items and content parts of one request; more is refused (400).",
    )

    # The in-flight budget and its queue.
    kv_budget_bytes: ByteSize | AutoKvBudget = Field(
        ByteSize(0),
        description=(
            "KV of all in-flight requests, per GPU; 0 turns it off; auto or auto:FRACTION "
            "takes it from vLLM's real KV pool."
        ),
    )
    queue_timeout_seconds: NonNegativeInt = Field(30, description="Longest wait for KV budget.")
    max_queue_depth: PositiveInt = Field(1024, description="Requests waiting for KV budget.")
    # Who waits first for it (docs/priority-and-fairness.md).
    objective_priorities: str = Field(
        "",
        description=(
            "OBJECTIVE=PRIORITY,... for x-gateway-inference-objective / "
            "x-llm-d-inference-objective: higher bands are served first, negative ones are "
            "shed rather than queued; an objective not listed gets 0."
        ),
    )
    fairness: bool = Field(
        True,
        description=(
            "Share the queue fairly by predicted KV bytes between the tenants the fairness "
            "header names; requests without it are one tenant."
        ),
    )
    fairness_id_header: str = Field(
        "",
        description=(
            "Header naming the tenant; empty: x-gateway-inference-fairness-id, then "
            "x-llm-d-inference-fairness-id."
        ),
    )
    trust_request_priority: bool = Field(
        False,
        description=(
            "Order the queue by the body's priority (vLLM's sign: lower is served earlier) "
            "when no objective header is sent; it is forwarded unchanged either way."
        ),
    )
    max_tenant_queue_depth: NonNegativeInt = Field(
        0, description="Requests one tenant may have waiting in one band; 0: no own limit."
    )
    priority_aging_seconds: NonNegativeFloat = Field(
        0.0,
        description=(
            "A request that has waited this long is served before any that has not, "
            "whatever its band; 0: bands are strict."
        ),
    )

    # Closing the loop with vLLM.
    engine_poll_seconds: NonNegativeFloat = Field(
        10.0, description="How often to read vLLM's /v1/models and /metrics; 0 turns it off."
    )
    saturation_kv_usage: Annotated[float, Field(gt=0, le=1)] | None = Field(
        None, description="Hold new requests while vllm:kv_cache_usage_perc is at least this."
    )
    saturation_waiting_requests: PositiveInt | None = Field(
        None, description="Hold new requests while vllm:num_requests_waiting is at least this."
    )
    pricing: Pricing = Field(
        Pricing.AUTO,
        description=(
            "Image tokens from the native rule, from vLLM's own /tokenize count (engine), or "
            "auto: the rule where the family has one, vLLM otherwise."
        ),
    )
    rule_mismatch: RuleMismatch = Field(
        RuleMismatch.WARN,
        description=(
            "When the start-up self-check finds the rule disagreeing with vLLM: warn, switch "
            "to engine pricing, or refuse (stay not ready; enforce mode only)."
        ),
    )
    engine_memo_entries: PositiveInt = Field(
        4096, description="Image sizes whose vLLM count is remembered (least recent forgotten)."
    )
    engine_memo_path: str | None = Field(
        None, description="JSON file keeping vLLM's counts across restarts; unset: memory only."
    )
    engine_calibration_concurrency: PositiveInt = Field(
        2, description="Calls to vLLM's /tokenize at once, to learn sizes not yet known."
    )
    engine_calibrations_per_second: PositiveFloat = Field(
        20.0, description="Average calls to vLLM's /tokenize per second, with as many at once."
    )
    engine_calibration_timeout_seconds: PositiveFloat = Field(
        5.0,
        description="Longest wait for vLLM's count of a size; then it is priced at the bound.",
    )
    force_stream_usage: bool = Field(
        False, description="Ask vLLM for the streaming usage chunk and hide it from clients."
    )

    # What to do when over a budget.
    over_budget_action: OverBudgetAction = Field(
        OverBudgetAction.REJECT,
        description="reject, or downscale the images until the request fits every budget.",
    )
    downscale_method: DownscaleMethod = Field(
        DownscaleMethod.RESIZE,
        description=(
            "resize rewrites the images; processor_kwargs sends mm_processor_kwargs.max_pixels "
            "(needs vLLM's --trust-request-mm-kwargs)."
        ),
    )
    downscale_workers: PositiveInt = Field(2, description="Threads that resize images.")
    downscale_jpeg_quality: Annotated[int, Field(ge=1, le=100)] = Field(
        90, description="JPEG quality of a downscaled JPEG (other formats keep theirs)."
    )

    # Remote images, other media and text.
    remote_images: RemoteImages = Field(
        RemoteImages.ASSUME_MAX,
        description="How image URLs are priced: assume_max, probe (fetch the header) or reject.",
    )
    remote_image_allowed_domains: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Comma-separated domains that probe may fetch from; empty: any public host.",
    )
    remote_image_max_bytes: ByteSize = Field(ByteSize(2**20), description="Header fetch cap.")
    remote_image_timeout_seconds: PositiveFloat = Field(
        5.0, description="Whole header fetch of one image URL."
    )
    video_tokens_per_item: NonNegativeInt = Field(
        16_384, description="Allowance per video that cannot be priced exactly."
    )
    audio_tokens_per_item: NonNegativeInt = Field(1_500, description="Allowance per audio.")
    embeds_tokens_per_item: NonNegativeInt = Field(
        0,
        description=(
            "Allowance per embeddings input (image_embeds, prompt_embeds, ...), which vLLM "
            "takes only with --enable-mm-embeds or --enable-prompt-embeds; 0 refuses them."
        ),
    )
    default_output_tokens: PositiveInt = Field(
        1024, description="Output tokens assumed when the request sets no max_tokens."
    )
    exact_text_tokens: bool = Field(
        True,
        description="Count chat text with the model directory's tokenizer and chat template.",
    )
    text_chars_per_token: PositiveFloat = Field(
        3.0, description="Conservative characters per text token."
    )

    # Timeouts and shutdown.
    upstream_connect_timeout_seconds: PositiveFloat = Field(5.0, description="Connecting to vLLM.")
    upstream_read_timeout_seconds: PositiveFloat = Field(600.0, description="Between chunks.")
    client_read_timeout_seconds: PositiveFloat = Field(30.0, description="Slow clients.")
    drain_seconds: NonNegativeInt = Field(30, description="Grace period on SIGTERM.")

    # Logging.
    log_level: Literal["debug", "info", "warning", "error", "critical"] = Field(
        "info", description="Least severe event logged."
    )
    log_format: LogFormat = Field(
        LogFormat.AUTO, description="json, console, or auto (console on a terminal)."
    )

    # The traffic record that `vlm-sidecar replay` and `advise` read.
    traffic_log: str | None = Field(
        None,
        description=(
            "JSONL file: one line per inspected request with what re-pricing needs (sizes, "
            "token counts, timings, decision) and no content; unset: off."
        ),
    )
    traffic_log_max_bytes: ByteSize = Field(
        ByteSize(25 * 2**20),
        description="Size at which the traffic log rotates; one backup (FILE.1) is kept.",
    )
    traffic_log_tenant: TenantInLog = Field(
        TenantInLog.HASH,
        description="How the traffic log records a tenant: hash (salted) or as_sent.",
    )
    traffic_log_tenant_salt: str = Field(
        "",
        description=(
            "Salt of the tenant hash; empty: a random one per process, so hashes do not "
            "match across restarts."
        ),
    )

    @field_validator("objective_priorities")
    @classmethod
    def _check_objective_priorities(cls, value: str) -> str:
        parse_objective_priorities(value)  # a ValueError names the bad item
        return value

    @field_validator("pipeline_layer_partition", mode="before")
    @classmethod
    def _split_layer_counts(cls, value: object) -> object:
        """``13,15`` as vLLM reads ``VLLM_PP_LAYER_PARTITION``; empty means unset."""
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",")) if value.strip() else ()
        return value

    @field_validator("remote_image_allowed_domains", mode="before")
    @classmethod
    def _split_domains(cls, value: object) -> object:
        if isinstance(value, str):
            return [d.strip().lower() for d in value.split(",") if d.strip()]
        return value

    @classmethod
    def env_name(cls, field: str) -> str:
        """The environment variable that sets ``field``."""
        alias = cls.model_fields[field].validation_alias
        if isinstance(alias, AliasChoices):
            return next(str(c) for c in alias.choices if str(c).startswith(ENV_PREFIX))
        return ENV_PREFIX + field.upper()

    @property
    def trusts_request_mm_kwargs(self) -> bool:
        """Whether a request's own ``mm_processor_kwargs`` are priced with (and forwarded)
        rather than refused as vLLM refuses them: vLLM trusts them
        (SIDECAR_TRUST_REQUEST_MM_KWARGS), or the sidecar downscales through them, which
        needs vLLM to trust them."""
        return (
            self.trust_request_mm_kwargs
            or self.downscale_method is DownscaleMethod.PROCESSOR_KWARGS
        )

    def kv_budget_auto_fraction(self) -> float | None:
        """The fraction of vLLM's KV pool to use, when the budget is ``auto[:FRACTION]``."""
        if not isinstance(self.kv_budget_bytes, str):
            return None
        _, _, fraction = self.kv_budget_bytes.partition(":")
        return float(fraction) if fraction else 1.0
