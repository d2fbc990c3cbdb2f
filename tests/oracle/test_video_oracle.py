"""The Qwen video rules against transformers' own sampling and resize, and vLLM's timestamps.

Videos come from ``tests.support.videos``. The oracles:

* transformers' own code, compiled from its source files: ``Qwen2VLVideoProcessor`` and
  ``Qwen3VLVideoProcessor`` import torch at the top of their modules (not installed here), so
  ``sample_frames`` and each module's ``smart_resize`` are taken out with ``ast`` and run on
  their own. Two torch pieces are replicated instead, and named where they are used: the
  length of ``torch.arange`` (ATen's ``compute_arange_size``: ``ceil((end - start) / step)``
  in double precision) in Qwen2's ``sample_frames``, and ``patchify``'s padding of the frame
  count to a multiple of ``temporal_patch_size`` (a ``torch.cat``).
* vLLM 0.33, replicated from its source (vLLM is not installed): the loaders pass ``fps=2``
  to that same sampling, ``Qwen3VLProcessingInfo._calculate_timestamps`` and
  ``Qwen3VLMultiModalProcessor.get_video_repl`` build Qwen3-VL's timestamps.

The brief's worked example (8,464 tokens) is in ``tests/unit/video/test_qwen.py``.
"""

from __future__ import annotations
import __future__

import ast
import contextlib
import math
import random
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import orjson
import pytest
import transformers
from transformers import PreTrainedTokenizerFast
from transformers.video_utils import VideoMetadata

from sidecar.body.request_body import parse_request_body
from sidecar.cost.assembly import PricingPolicy
from sidecar.cost.pricer import Pricer
from sidecar.errors import VideoError
from sidecar.profiles import load_profile
from sidecar.profiles.builtins import BUILTIN_MODELS
from sidecar.routes import Route
from sidecar.settings import Settings
from sidecar.text.text_tokens import PromptCounter
from sidecar.video.probe import VideoHeader, probe_video_bytes
from sidecar.video.qwen import QwenVideoRule, clip_smart_resize
from tests.support.model_dirs import QWEN2_VL_CHAT_TEMPLATE, write_qwen_tokenizer
from tests.support.videos import (
    CLASS_DEFAULT_RULES,
    MP4,
    PROBE_CASES,
    QWEN3,
    QWEN3_RULE,
    QWEN25_RULE,
    make_video,
    mp4_uri,
    qwen3_directory,
    video_chat,
    video_part,
)

pytestmark = pytest.mark.oracle


MODELS = Path(transformers.__file__).parent / "models"
QWEN2_VIDEO = MODELS / "qwen2_vl" / "video_processing_qwen2_vl.py"
QWEN3_VIDEO = MODELS / "qwen3_vl" / "video_processing_qwen3_vl.py"


def _definition(path: Path, name: str) -> ast.FunctionDef:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    class_name, _, function_name = name.rpartition(".")
    body = tree.body
    if class_name:
        owner = next(n for n in body if isinstance(n, ast.ClassDef) and n.name == class_name)
        body = owner.body
    return next(n for n in body if isinstance(n, ast.FunctionDef) and n.name == function_name)


def transformers_function(path: Path, name: str, **namespace: Any) -> Callable[..., Any]:
    """A function or method of a transformers module, compiled from its source alone."""
    node = _definition(path, name)
    node.decorator_list = []
    code = compile(
        ast.Module(body=[node], type_ignores=[]),
        str(path),
        "exec",
        flags=__future__.annotations.compiler_flag,
        dont_inherit=True,
    )
    scope = {"math": math, "np": np, **namespace}
    exec(code, scope)  # noqa: S102 - transformers' own source, read from the installed package
    function: Callable[..., Any] = scope[node.name]
    return function


def class_attributes(path: Path, class_name: str) -> dict[str, Any]:
    """The constant class attributes (``min_frames = 4``, ``size = {...}``) of a class."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    owner = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name)
    values: dict[str, Any] = {"num_frames": None, "fps": None}  # BaseVideoProcessor's
    for node in owner.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            with contextlib.suppress(NameError):  # names such as PILImageResampling: not needed
                values[node.targets[0].id] = eval(  # noqa: S307 - constant expressions only
                    compile(ast.Expression(node.value), str(path), "eval"), {"__builtins__": {}}
                )
    return values


class _ArangeLength:
    """Replicates ``torch.arange(start, end, step).int()`` as far as its length goes: ATen's
    ``compute_arange_size`` computes ``ceil((end - start) / step)`` in double precision."""

    @staticmethod
    def arange(start: float, end: float, step: float) -> SimpleNamespace:
        length = math.ceil((end - start) / step)
        return SimpleNamespace(int=lambda: list(range(length)))


QWEN2_CLASS = class_attributes(QWEN2_VIDEO, "Qwen2VLVideoProcessor")
QWEN3_CLASS = class_attributes(QWEN3_VIDEO, "Qwen3VLVideoProcessor")
HF_QWEN2_SAMPLE = transformers_function(
    QWEN2_VIDEO, "Qwen2VLVideoProcessor.sample_frames", torch=_ArangeLength
)
HF_QWEN3_SAMPLE = transformers_function(QWEN3_VIDEO, "Qwen3VLVideoProcessor.sample_frames")
HF_QWEN2_RESIZE = transformers_function(QWEN2_VIDEO, "smart_resize")
HF_QWEN3_RESIZE = transformers_function(QWEN3_VIDEO, "smart_resize")
VLLM_LOADER_FPS = 2  # Qwen2VLVideoBackend / Qwen3VLVideoBackend.load_bytes(fps=2)


def oracle_frames(rule: QwenVideoRule, total: int, fps: float) -> list[int] | None:
    """The frame indices vLLM's loader samples (transformers' sample_frames with fps=2)."""
    metadata = VideoMetadata(total_num_frames=total, fps=fps)
    try:
        if rule.loader == "qwen3_vl":
            this = SimpleNamespace(**QWEN3_CLASS)
            return [int(i) for i in HF_QWEN3_SAMPLE(this, metadata, fps=VLLM_LOADER_FPS)]
        this = SimpleNamespace(**QWEN2_CLASS)
        indices = HF_QWEN2_SAMPLE(this, metadata, fps=VLLM_LOADER_FPS)
    except ZeroDivisionError:  # a 1-frame video: n floors to 0, arange's step divides by it
        return None
    return [int(i) for i in indices]


def oracle_tokens(rule: QwenVideoRule, header: VideoHeader) -> tuple[int, tuple[int, ...]] | str:
    """(tokens, grid) as the processor computes them, or "refused"."""
    frames = oracle_frames(rule, header.frame_count, header.fps or 0.0)
    if frames is None:
        return "refused"
    try:
        if rule.loader == "qwen3_vl":
            h, w = HF_QWEN3_RESIZE(
                len(frames), header.height_px, header.width_px,
                temporal_factor=rule.temporal_patch_size, factor=rule.factor,
                min_pixels=rule.min_pixels, max_pixels=rule.max_pixels,
            )  # fmt: skip
        else:
            h, w = HF_QWEN2_RESIZE(
                header.height_px, header.width_px, factor=rule.factor,
                min_pixels=rule.min_pixels, max_pixels=rule.max_pixels,
            )  # fmt: skip
    except ValueError:
        return "refused"
    # patchify pads the frames to a multiple of temporal_patch_size (replicated: a torch.cat).
    grid_t = (len(frames) + -len(frames) % rule.temporal_patch_size) // rule.temporal_patch_size
    grid = (grid_t, h // rule.patch_size, w // rule.patch_size)
    return grid[0] * grid[1] * grid[2] // rule.merge_size**2, grid


def vllm_timestamps(indices: list[int], video_fps: float, merge_size: int) -> list[float]:
    """vLLM's ``Qwen3VLProcessingInfo._calculate_timestamps``, replicated."""
    if len(indices) % merge_size != 0:
        indices = indices + [indices[-1]] * (merge_size - len(indices) % merge_size)
    timestamps = [idx / video_fps for idx in indices]
    return [
        (timestamps[i] + timestamps[i + merge_size - 1]) / 2
        for i in range(0, len(timestamps), merge_size)
    ]


RULES = {"qwen2_5_vl": QWEN25_RULE, "qwen3_vl": QWEN3_RULE, **CLASS_DEFAULT_RULES}


def _random_headers(count: int) -> list[VideoHeader]:
    rng = random.Random(20_251_129)
    rates = [1.0, 2.0, 7.5, 10.0, 12.0, 15.0, 24000 / 1001, 25.0, 30000 / 1001, 30.0, 60000 / 1001]
    headers = []
    for _ in range(count):
        fps = rng.choice(rates)
        frames = rng.choice([1, 2, 3, 4, 5, 7, 17, 75, 230, 367, 453, 1000, 5000, 40_000])
        frames = max(1, frames + rng.randint(-3, 3))
        width, height = rng.randint(8, 4000), rng.randint(8, 4000)
        headers.append(VideoHeader(width, height, frames / fps, fps, frames, MP4))
    edges = [
        VideoHeader(640, 640, 16.0, 2.0, 32, MP4),  # the brief
        VideoHeader(16, 16, 1.0, 16.0, 16, MP4),  # tiny: enlarged
        VideoHeader(20, 4000, 1.0, 30.0, 30, MP4),  # ratio 200: accepted
        VideoHeader(19, 4000, 1.0, 30.0, 30, MP4),  # ratio above 200: refused
        VideoHeader(1920, 1080, 1.0, 1.0, 1, MP4),  # one frame
        VideoHeader(3840, 2160, 1800.0, 60.0, 108_000, MP4),  # 30 min of 4K at 60 fps
    ]
    return edges + headers


HEADERS = _random_headers(400)


@pytest.mark.parametrize("rule", RULES.values(), ids=RULES.keys())
def test_rule_samples_as_many_frames_as_transformers_and_vllm(rule: QwenVideoRule) -> None:
    for header in HEADERS:
        expected = oracle_frames(rule, header.frame_count, header.fps or 0.0)
        if expected is None:
            with pytest.raises(VideoError, match="samples frames in multiples of 2"):
                rule.sampled_frames(header.frame_count, header.fps or 0.0)
            continue
        frames = rule.sampled_frames(header.frame_count, header.fps or 0.0)
        assert frames == len(expected), header
        if rule.loader == "qwen3_vl":
            assert rule.frame_indices(header.frame_count, frames) == expected, header


@pytest.mark.parametrize("rule", RULES.values(), ids=RULES.keys())
def test_rule_prices_videos_as_the_processor_does(rule: QwenVideoRule) -> None:
    mismatches = []
    for header in HEADERS:
        expected = oracle_tokens(rule, header)
        try:
            tokens = rule.video_tokens(header)
            got: tuple[int, tuple[int, ...]] | str = (tokens.tokens, tokens.grid)
        except VideoError:
            got = "refused"
        if got != expected:
            mismatches.append((header, got, expected))
    assert mismatches == []


LOCAL_VIDEOS = {case.id: case.values[0] for case in PROBE_CASES} | {
    "brief-640x640-32-frames": (640, 640, 32, 2),
    "arange-one-more": (32, 32, 75, 10),
    "one-frame": (32, 32, 1, 1),
}


@pytest.mark.parametrize("rule", RULES.values(), ids=RULES.keys())
@pytest.mark.parametrize("shape", LOCAL_VIDEOS.values(), ids=LOCAL_VIDEOS.keys())
def test_rule_prices_each_local_video_exactly(
    rule: QwenVideoRule, shape: tuple[int, int, int, Any]
) -> None:
    options = next((c.values[1] for c in PROBE_CASES if c.values[0] == shape), {})
    header = probe_video_bytes(make_video(*shape, **options))
    expected = oracle_tokens(rule, header)
    if expected == "refused":
        with pytest.raises(VideoError, match="the video has 1 frame"):
            rule.video_tokens(header)
        return
    cost = rule.video_tokens(header)
    assert (cost.tokens, cost.grid) == expected


def test_qwen3_timestamps_are_vllms_and_counted_exactly_with_a_tokenizer() -> None:
    header = probe_video_bytes(make_video(32, 32, 75, Fraction(15, 2)))  # 10 s at 7.5 fps
    frames = QWEN3_RULE.sampled_frames(header.frame_count, header.fps or 0.0)
    indices = oracle_frames(QWEN3_RULE, header.frame_count, header.fps or 0.0)
    assert indices is not None
    expected = vllm_timestamps(indices, header.fps or 0.0, QWEN3_RULE.merge_size)
    assert QWEN3_RULE.timestamps(header.frame_count, header.fps or 0.0, frames) == expected
    texts = [f"<{t:.1f} seconds>" for t in expected]
    assert texts[:2] == ["<0.3 seconds>", "<1.3 seconds>"]  # frames (0, 4) and (8, 12)

    def qwen_like(text: str) -> int:  # one token a digit, plus "<", ".", " seconds", ">"
        return sum(c.isdigit() for c in text) + 4

    exact = QWEN3_RULE.video_tokens(header, count_text_tokens=qwen_like)
    estimate = QWEN3_RULE.video_tokens(header)
    groups = exact.grid[0]
    assert exact.timestamp_tokens_exact
    assert not estimate.timestamp_tokens_exact
    assert exact.wrapper_tokens == 2 * groups + sum(qwen_like(t) for t in texts)
    assert estimate.wrapper_tokens == 2 * groups + sum(len(t) for t in texts)
    assert estimate.wrapper_tokens - exact.wrapper_tokens == 7 * groups
    assert exact.tokens == estimate.tokens


def test_cap_pixels_per_frame_bounds_each_frame_as_qwen_vl_utils() -> None:
    """The cap's arithmetic from the processors' ``resize`` (its torch part is a shape read)."""
    qwen2 = replace_rule(QWEN25_RULE, cap_pixels_per_frame=True)
    frames = 768
    total_pixels = int(128_000 * 28 * 28 * 0.9)
    bound = max(min(12_845_056, total_pixels * 2 // frames), int(3136 * 1.05))
    expected = HF_QWEN2_RESIZE(1080, 1920, factor=28, min_pixels=3136, max_pixels=bound)
    assert qwen2.resized_frame(1920, 1080, frames) == (expected[1], expected[0])
    qwen3 = replace_rule(QWEN3_RULE, cap_pixels_per_frame=True)
    per_frame = max(min(768 * 32 * 32, 25_165_824 // frames), int(4096 * 1.05))
    expected = HF_QWEN3_RESIZE(
        frames, 1080, 1920, temporal_factor=2, factor=32, min_pixels=4096,
        max_pixels=per_frame * frames,
    )  # fmt: skip
    assert qwen3.resized_frame(1920, 1080, frames) == (expected[1], expected[0])
    assert qwen3.resized_frame(1920, 1080, 4) != QWEN3_RULE.resized_frame(1920, 1080, 4)


def replace_rule(rule: QwenVideoRule, **changes: Any) -> QwenVideoRule:
    return QwenVideoRule(**{**{f: getattr(rule, f) for f in rule.__dataclass_fields__}, **changes})


def test_clip_smart_resize_is_transformers_qwen3_function() -> None:
    rng = random.Random(3)
    for _ in range(2_000):
        args = (rng.randint(2, 800), rng.randint(1, 3000), rng.randint(1, 3000))
        bounds = {"temporal_factor": 2, "factor": 32, "min_pixels": 4096, "max_pixels": 25_165_824}
        try:
            expected: Any = HF_QWEN3_RESIZE(*args, **bounds)
        except ValueError:
            expected = "refused"
        try:
            got: Any = clip_smart_resize(*args, **bounds)
        except Exception:
            got = "refused"
        assert got == expected, args


def test_class_defaults_fill_what_a_video_config_leaves_out() -> None:
    qwen2 = CLASS_DEFAULT_RULES["qwen2_5_vl-class-defaults"]
    qwen3 = CLASS_DEFAULT_RULES["qwen3_vl-class-defaults"]
    assert (qwen2.min_pixels, qwen2.max_pixels, qwen2.max_video_tokens) == (
        128 * 28 * 28, 28 * 28 * 768, 128_000,
    )  # fmt: skip
    assert (qwen3.min_pixels, qwen3.max_pixels, qwen3.max_video_tokens) == (
        128 * 32 * 32, 32 * 32 * 768, 768,
    )  # fmt: skip
    for rule, path, name in (
        (qwen2, QWEN2_VIDEO, "Qwen2VLVideoProcessor"),
        (qwen3, QWEN3_VIDEO, "Qwen3VLVideoProcessor"),
    ):
        attributes = class_attributes(path, name)
        assert attributes["size"] == {
            "shortest_edge": rule.min_pixels, "longest_edge": rule.max_pixels,
        }  # fmt: skip
        assert (attributes["patch_size"], attributes["temporal_patch_size"]) == (
            rule.patch_size, rule.temporal_patch_size,
        )  # fmt: skip
        assert (attributes["min_frames"], attributes["max_frames"]) == (4, 768)


# --- Qwen3-VL timestamps counted with the model directory's tokenizer -------------------------


@pytest.fixture(scope="module")
def qwen3_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Qwen3-VL-8B directory with a small byte-level BPE tokenizer trained here."""
    directory = qwen3_directory(
        tmp_path_factory.mktemp("qwen3") / "model",
        video_preprocessor_config=BUILTIN_MODELS[QWEN3].video_preprocessor or {},
    )
    corpus = [f"<{t / 10:.1f} seconds> what happens in the video" for t in range(0, 400, 7)]
    return write_qwen_tokenizer(directory, corpus * 5, vocab_size=400)


async def test_qwen3_video_prompt_tokens_equal_vllms_expansion_with_the_tokenizer(
    qwen3_dir: Path,
) -> None:
    profile = load_profile(str(qwen3_dir))
    counter = PromptCounter.from_model_dir(qwen3_dir, profile.architecture.prompt_family)
    assert counter is not None
    assert isinstance(profile.video, QwenVideoRule)
    video = make_video(32, 32, 75, Fraction(15, 2))
    body = video_chat(video_part(mp4_uri(video)))
    raw = orjson.dumps(body)
    prediction = await Pricer(
        profile, PricingPolicy.from_settings(Settings(model=str(qwen3_dir))), None, counter
    ).price(parse_request_body(raw, Route.CHAT), raw)
    # The oracle: the template through transformers, then vLLM's get_video_repl in place of
    # <|vision_start|><|video_pad|><|vision_end|> (replicated: vLLM is not installed).
    fast = PreTrainedTokenizerFast(tokenizer_file=str(qwen3_dir / "tokenizer.json"))
    messages = [{"role": "user", "content": [
        {"type": "text", "text": "What happens?"}, {"type": "video"},
    ]}]  # fmt: skip
    text = fast.apply_chat_template(
        messages, chat_template=QWEN2_VL_CHAT_TEMPLATE, add_generation_prompt=True, tokenize=False
    )
    ids = fast.encode(text, add_special_tokens=False)
    header = probe_video_bytes(video)
    indices = oracle_frames(profile.video, header.frame_count, header.fps or 0.0)
    assert indices is not None
    grid = oracle_tokens(profile.video, header)
    assert not isinstance(grid, str)
    per_group = grid[0] // grid[1][0]
    expansion = sum(
        len(fast.encode(f"<{t:.1f} seconds>", add_special_tokens=False)) + 1 + per_group + 1
        for t in vllm_timestamps(indices, header.fps or 0.0, 2)
    )
    assert prediction.text_tokens_exact
    assert prediction.videos[0].tokens.timestamp_tokens_exact
    assert prediction.prompt_tokens == len(ids) - 3 + expansion
