"""vLLM 0.33's own multimodal processors, run in-process: the oracle for the new families.

Run with ``.tools/vllm-render/bin/python`` (vLLM 0.33.0 on CPU torch, no GPU, no weights),
never imported by the sidecar's tests themselves: they write a spec, run this once for every
family, and read the answers back::

    .tools/vllm-render/bin/python tests/renderer/vllm_processors.py SPEC.json ANSWERS.json

SPEC holds ``{"families": [{"name", "directory", "mm_processor_kwargs", "count", "prompt",
"sizes", "apply", "images", "groups", "most_sizes", "max_model_len", "modality"}]}``
(``modality``: ``image`` unless the family's processor takes another, Kimi-K2.5's
``vision_chunk``). For each family this builds vLLM's processor from the model directory as
``vllm serve`` would (``ModelConfig`` +
``MULTIMODAL_REGISTRY.create_processor``), then:

* ``sizes``: the placeholder length vLLM's own counting code gives each (width, height)
  (``COUNTS[count]``: the processor's placeholder-count function, as vLLM's prompt update
  calls it, with the HF processor built once), thousands a second;
* ``apply``: the full ``processor(prompt, image)`` path (HF image processing, prompt
  updates, placeholder validation) on a blank image of each size: the placeholder's length
  (with ``images`` > 1, the last of that many images in one prompt);
* ``groups``: the same path on several images in one prompt, for the families whose images
  share a budget: each image's placeholder length;
* ``most_sizes``: for those families, the most any request can give an image of each size
  (``MOSTS[count]``, vLLM's own function over every budget it can hand the image).

An answer is the length, or ``"error: ..."`` where vLLM raises. A family whose processor
cannot be built answers ``{"error": ...}``. ANSWERS maps each name to
``{"counts": [...], "apply": [...], "together": [[...], ...], "most": [...], "seconds": float}``.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from PIL import Image

Count = Callable[[int, int], int]


def _gemma4(processor: Any) -> Count:
    # Gemma4MultiModalProcessor._get_prompt_updates.get_replacement_image, sizes for items.
    from vllm.model_executor.models import gemma4_mm

    info = processor.info
    hf = info.get_hf_processor()
    value, _ = gemma4_mm._get_max_soft_tokens(info.ctx.get_merged_mm_kwargs({}))
    budget = value if isinstance(value, int) and value in gemma4_mm._SUPPORTED_SOFT_TOKENS else None

    def count(width: int, height: int) -> int:
        details = info.get_image_repl(
            image_width=width, image_height=height, processor=hf, max_soft_tokens=budget
        )
        return len(details.full)

    return count


def _internvl_style(processor: Any) -> Count:
    # BaseInternVLMultiModalProcessor._get_prompt_repl_image.get_replacement_internvl.
    info = processor.info
    hf = info.get_hf_processor()

    def count(width: int, height: int) -> int:
        features = info.get_num_image_tokens(image_width=width, image_height=height, processor=hf)
        return len(hf.get_image_repl(None, num_features=features).full)

    return count


def _nvlm_d(processor: Any) -> Count:
    # NVLMMultiModalProcessor._get_prompt_repl_image.get_replacement_nvlm: the tile count the
    # image processor makes (its num_patches, what get_num_image_tokens counts in tiles), the
    # tagged replacement encoded, then the encoded newline.
    from vllm.multimodal.processing import cached_encode

    info = processor.info
    hf = info.get_hf_processor()
    newline = len(cached_encode(info.get_tokenizer(), "\n", add_special_tokens=False))

    def count(width: int, height: int) -> int:
        features = info.get_num_image_tokens(image_width=width, image_height=height, processor=hf)
        tiles = features // hf.image_seq_length
        return len(hf.get_image_repl(tiles, num_features=features).full) + newline

    return count


def _nemotron_vl(processor: Any) -> Count:
    # BaseInternVLMultiModalProcessor.get_replacement_internvl builds the placeholder from the
    # tiles the image processor made (image_num_patches), and the server's tiling kwargs reach
    # that call (LlamaNemotronNanoVLImageProcessor._images_to_pixel_values_lst); its
    # get_num_image_tokens ignores them. Here the same functions, on the size alone.
    from vllm.transformers_utils.processors import nemotron_vl

    info = processor.info
    hf = info.get_hf_processor()
    kwargs = info.ctx.get_merged_mm_kwargs({})
    image_processor = hf.image_processor
    min_num, max_num = image_processor.resolve_min_max_num(
        min_dynamic_patch=kwargs.get("min_dynamic_patch"),
        max_dynamic_patch=kwargs.get("max_dynamic_patch"),
        dynamic_image_size=kwargs.get("dynamic_image_size"),
        use_thumbnail=False,
    )
    ratios = nemotron_vl.get_nemotron_vl_target_ratios(min_num, max_num)

    def count(width: int, height: int) -> int:
        tiles, _, _ = nemotron_vl.calculate_nemotron_vl_targets(
            orig_width=width, orig_height=height, target_ratios=ratios,
            image_size=image_processor.image_size, use_thumbnail=image_processor.use_thumbnail,
        )  # fmt: skip
        return len(hf.get_image_repl(tiles).full)

    return count


def _nano_nemotron_vl(processor: Any) -> Count:
    # NanoNemotronVLMultiModalProcessor.get_image_replacement: InternVL's tiles counted by
    # get_num_image_tokens, or the dynamic tiler's num_embeddings for the image, which the HF
    # processor computes from the dummy text's length (bare <image> tokens: no text) and
    # max_model_len. Here the same functions, on the size alone (the tiler reads no pixels).
    hf = processor.info.get_hf_processor()
    tiler = hf.dynamic_tiler
    text_tokens = len(hf.tokenizer("", add_special_tokens=False).input_ids)

    def count(width: int, height: int) -> int:
        if tiler is None:
            features = hf.get_num_image_tokens(
                image_width=width, image_height=height, max_num_tiles=hf.max_num_tiles
            )
        else:
            media = Image.Image()
            media._size = (width, height)
            budget = tiler.max_num_tokens_available(text_tokens)
            features = tiler.compute_params([media], budget)[0].num_embeddings
        return len(hf.get_image_repl(features, None).full)

    return count


def _nano_nemotron_vl_most(processor: Any) -> Count:
    # The dynamic tiler's most embeddings for the image over every budget compute_params can
    # hand it (min_num_patches up to its first share), alone or beside other images: the
    # never-low price. process_media itself, budget by budget.
    hf = processor.info.get_hf_processor()
    tiler = hf.dynamic_tiler
    text_tokens = len(hf.tokenizer("", add_special_tokens=False).input_ids)
    available = tiler.max_num_tokens_available(text_tokens) * 4
    available = max(available, tiler._min_num_patches)
    share = int(max(min(available, tiler._max_num_patches), tiler._min_num_patches))

    def count(width: int, height: int) -> int:
        media = Image.Image()
        media._size = (width, height)
        most = 0
        for budget in range(tiler._min_num_patches, share + 1):
            try:
                params, _ = tiler.process_media(media, budget)
            except ZeroDivisionError:  # that budget fails in vLLM: no count
                continue
            most = max(most, params.num_embeddings)
        return len(hf.get_image_repl(most, None).full)

    return count


def _h2ovl(processor: Any) -> Count:
    # H2OVLMultiModalProcessor.get_replacement_internvl for a lone image: the tiles the
    # image processor made (MSAC's two passes where use_msac), as get_num_image_tokens counts
    # them for one image.
    info = processor.info
    hf = info.get_hf_processor()

    def count(width: int, height: int) -> int:
        features = info.get_num_image_tokens(
            image_width=width, image_height=height, processor=hf, use_msac=None
        )
        return len(hf.get_image_repl(features // hf.image_seq_length).full)

    return count


def _prompt_update(processor: Any) -> Count:
    # The whole of the one update _get_prompt_updates makes for an item of the size (PaliGemma's
    # insertion: its <image> tokens and the <bos> behind them). The item is a zero-stride
    # array: only its shape is read (3 rows would read as channels first: a size-dependent
    # count takes "info").
    import numpy as np
    from vllm.multimodal.inputs import MultiModalKwargsItems

    def count(width: int, height: int) -> int:
        image = np.broadcast_to(np.uint8(0), (height, width, 3))
        items = processor.info.parse_mm_data({"image": [image]})
        (update,) = processor._get_prompt_updates(items, {}, MultiModalKwargsItems({}))
        return len(update.resolve(0).content.full)

    return count


def _molmo2(processor: Any) -> Count:
    # Molmo2MultiModalProcessor._get_prompt_updates.get_image_replacement_molmo2: the image's
    # replacement (low-res view and overlapping crops, column tokens, start and end tokens) for
    # an item of the size, a zero-stride array as in _prompt_update.
    import numpy as np
    from vllm.multimodal.inputs import MultiModalKwargsItems

    def count(width: int, height: int) -> int:
        image = np.broadcast_to(np.uint8(0), (height, width, 3))
        items = processor.info.parse_mm_data({"image": [image]})
        updates = processor._get_prompt_updates(items, {}, MultiModalKwargsItems({}))
        (update,) = [update for update in updates if update.modality == "image"]
        return len(update.resolve(0).content.full)

    return count


def _info(processor: Any) -> Count:
    # BaseLlavaMultiModalProcessor's replacement: get_num_image_tokens <image> tokens
    # (Granite 4 Vision's override of LLaVA-NeXT's count).
    info = processor.info

    def count(width: int, height: int) -> int:
        return int(info.get_num_image_tokens(image_width=width, image_height=height))

    return count


def _image_repl(processor: Any) -> Count:
    # Families whose info builds each image's replacement from its size (Gemma 3n).
    info = processor.info
    hf = info.get_hf_processor()

    def count(width: int, height: int) -> int:
        details = info.get_image_repl(image_width=width, image_height=height, processor=hf)
        return len(details.full)

    return count


def _image_processor_info(processor: Any) -> Count:
    # get_num_image_tokens over the image processor vLLM builds (server kwargs merged inside):
    # PaddleOCRVLMultiModalProcessor._get_prompt_updates.get_replacement; for the Qwen3-VL
    # heirs (Cosmos 3 Edge, Alpamayo 2 Super) the count their ProcessingInfo gives the grid
    # the HF processor makes, which the full path checks.
    info = processor.info
    image_processor = info.get_image_processor()

    def count(width: int, height: int) -> int:
        return int(
            info.get_num_image_tokens(
                image_width=width, image_height=height, image_processor=image_processor,
                mm_kwargs={},
            )
        )  # fmt: skip

    return count


def _keye(processor: Any) -> Count:
    # KeyeMultiModalProcessor._get_prompt_updates takes the remote processor's image_grid_thw
    # (a stand-in here); vLLM's own get_num_image_tokens computes the same grid with its copy
    # of that processor's smart_resize, which raises past 200:1. An image resized to no pixels
    # counts 0 there, but no processor can make it.
    info = processor.info
    image_processor = info.get_image_processor()

    def count(width: int, height: int) -> int:
        tokens = int(
            info.get_num_image_tokens(
                image_width=width, image_height=height, image_processor=image_processor,
                mm_kwargs={},
            )
        )  # fmt: skip
        if tokens == 0:
            raise ValueError(f"no patches: {width}x{height}")
        return tokens

    return count


def _ovis2_5(processor: Any) -> Count:
    # Ovis2_5MultiModalProcessor._get_prompt_updates.get_replacement_ovis takes the grid the
    # HF processor made (preprocess_multidata: its smart_resize, then patches of patch_size);
    # here the same functions of the processor, on the size alone.
    from vllm.transformers_utils.processors import ovis2_5

    hf = processor.info.get_hf_processor()

    def count(width: int, height: int) -> int:
        min_pixels = min(ovis2_5.MAX_PIXELS, ovis2_5.MIN_PIXELS)
        resized_h, resized_w = hf.smart_resize(
            height, width, factor=hf.patch_size * hf.hidden_stride,
            min_pixels=min_pixels, max_pixels=ovis2_5.MAX_PIXELS,
        )  # fmt: skip
        grid = [1, resized_h // hf.patch_size, resized_w // hf.patch_size]
        if 0 in grid:  # the HF processor cannot make an image with no patches: apply raises
            raise ValueError(f"no patches: grid {grid}")
        return len(hf.construct_visual_placeholders(grid))

    return count


def _deepseek_ocr(processor: Any) -> Count:
    # DeepseekOCR(2)MultiModalProcessor._get_prompt_updates.get_replacement_deepseek_vl2:
    # get_num_image_tokens with the module's CROP_MODE, for OCR and OCR-2 alike.
    from vllm.transformers_utils.processors.deepseek_ocr import CROP_MODE

    info = processor.info

    def count(width: int, height: int) -> int:
        return int(
            info.get_num_image_tokens(image_width=width, image_height=height, cropping=CROP_MODE)
        )

    return count


def _minicpmv4_6(processor: Any, image_index: int = 0) -> Count:
    # MiniCPMV4_6MultiModalProcessor._get_prompt_updates.get_image_replacement: the
    # placeholder text for the image at ``image_index``, with the downsample mode and slice
    # maximum resolved from the server's kwargs as there, encoded by the tokenizer.
    from vllm.model_executor.models.minicpmv4_6 import MiniCPMV4_6MultiModalProcessor
    from vllm.multimodal.parse import ImageSize
    from vllm.multimodal.processing.processor import cached_encode

    assert isinstance(processor, MiniCPMV4_6MultiModalProcessor)
    tokenizer = processor.info.get_tokenizer()
    downsample_mode = processor._resolve_downsample_mode({}, modality="image")
    max_slice_nums = processor._resolve_max_slice_nums({})

    def count(width: int, height: int) -> int:
        text = processor.get_image_prompt_texts(
            ImageSize(width=width, height=height), image_index,
            downsample_mode=downsample_mode, max_slice_nums=max_slice_nums,
        )  # fmt: skip
        return len(cached_encode(tokenizer, text, add_special_tokens=False))

    return count


def _minicpmv(processor: Any, image_index: int = 0) -> Count:
    # MiniCPMVMultiModalProcessor._get_prompt_updates.get_image_replacement: the placeholder
    # text get_image_prompt_texts asks of the image processor (the checkpoint's remote one; a
    # stand-in here) for the image at ``image_index``, encoded by the tokenizer.
    from vllm.multimodal.parse import ImageSize
    from vllm.multimodal.processing.processor import cached_encode

    tokenizer = processor.info.get_tokenizer()

    def count(width: int, height: int) -> int:
        text = processor.get_image_prompt_texts(ImageSize(width=width, height=height), image_index)
        return len(cached_encode(tokenizer, text, add_special_tokens=False))

    return count


class _Sized:
    """An image as far as a count reads it: its size (PIL's ``(width, height)``)."""

    def __init__(self, width: int, height: int) -> None:
        self.size = (width, height)


def _kimi_k25(processor: Any) -> Count:
    # KimiK25MultiModalProcessor._get_prompt_updates.get_replacement: media_tokens_calculator,
    # which converts the item to RGB (a no-op for its size) and reads get_resize_config.
    image_processor = processor.info.image_processor

    def count(width: int, height: int) -> int:
        media = {"type": "image", "image": _Sized(width, height)}
        return int(image_processor.get_resize_config(media)["num_tokens"])

    return count


def _kimi_vl(processor: Any) -> Count:
    # KimiVLMultiModalProcessor._get_prompt_updates.get_replacement: vLLM's own
    # get_num_image_tokens; then the HF processor's resize, which refuses a side of 512
    # patches or more (the stand-in for the checkpoint's remote processor: not vLLM's code).
    info = processor.info
    image_processor = info.get_hf_processor().image_processor

    def count(width: int, height: int) -> int:
        tokens = int(info.get_num_image_tokens(image_width=width, image_height=height))
        patch = image_processor.patch_size
        if width // patch * (height // patch) > image_processor.in_token_limit:
            scale = math.sqrt(
                image_processor.in_token_limit / ((width // patch) * (height // patch))
            )
            width, height = int(width * scale), int(height * scale)
        cell = image_processor.merge_kernel_size[0] * patch
        if (
            min(width, height) == 0
            or max(-(-width // cell), -(-height // cell)) * cell // patch >= 512
        ):
            raise ValueError(f"Exceed pos emb: {width}x{height}")
        return tokens

    return count


def _lfm2_vl(processor: Any) -> Count:
    # Lfm2VLMultiModalProcessor._get_prompt_updates.get_image_replacement_lfm2vl: vLLM's
    # get_image_repl over the thumbnail's patch grid (spatial_shapes) that transformers' image
    # processor makes with its smart_resize, tokenized as vLLM encodes it.
    import torch

    info = processor.info
    hf = info.get_hf_processor()
    image_processor = hf.image_processor
    tokenizer = info.get_tokenizer()
    merged = info.ctx.get_merged_mm_kwargs({})

    def knob(name: str) -> Any:
        return merged.get(name, getattr(image_processor, name))

    patch = knob("encoder_patch_size")
    crop_patches = max(
        knob("max_image_tokens") * knob("downsample_factor") ** 2,
        (knob("tile_size") // patch) ** 2,
    )

    def count(width: int, height: int) -> int:
        thumb_w, thumb_h = image_processor.smart_resize(
            height=height, width=width, downsample_factor=knob("downsample_factor"),
            min_image_tokens=knob("min_image_tokens"), max_image_tokens=knob("max_image_tokens"),
            encoder_patch_size=patch,
        )  # fmt: skip
        grid_w, grid_h, _ = info._get_image_feature_grid_size(width, height, hf, {})
        thumb_patches = (thumb_h // patch) * (thumb_w // patch)
        if grid_w * grid_h != 1 and thumb_patches > crop_patches:
            # the processor stacks the thumbnail with its tiles: a larger one fails there
            raise ValueError(f"thumbnail of {thumb_patches} patches beside tiles")
        spatial_shapes = torch.tensor([[thumb_h // patch, thumb_w // patch]])
        replacement = info.get_image_repl(width, height, spatial_shapes, hf, {})
        return len(tokenizer.encode(replacement, add_special_tokens=False))

    return count


def _deepseek_vl2(cropping: bool) -> Callable[[Any], Count]:
    # DeepseekVL2MultiModalProcessor._get_prompt_updates.get_replacement_deepseek_vl2, with
    # the prompt's cropping=len(images) <= 2: True for one or two images, False for more.
    def build(processor: Any) -> Count:
        info = processor.info

        def count(width: int, height: int) -> int:
            return int(
                info.get_num_image_tokens(image_width=width, image_height=height, cropping=cropping)
            )

        return count

    return build


def _deepseek_vl2_embeddings(item: Any, processor: Any) -> int:
    # What DeepseekVLV2ForCausalLM._pixel_values_to_embedding yields for one processed image:
    # its SigLIP tower is vit_so400m_patch14_siglip_384 whatever the processor's patch_size
    # (14 px patches), then config.json's projector downsampling; global view and local views
    # each end their rows in a newline, one separator between them.
    downsample = int(processor.info.get_hf_config().projector_config.downsample_ratio)
    pixels = item["pixel_values"].data
    columns, rows = (int(v) for v in item["images_spatial_crop"].data.tolist())
    if int(pixels.shape[0]) != columns * rows + 1:
        raise ValueError(f"{pixels.shape[0]} views for a {columns} x {rows} grid")
    cells = -(-(int(pixels.shape[-1]) // 14) // downsample)
    return cells * (cells + 1) + 1 + (rows * cells) * (columns * cells + 1)


def _deepseek_ocr_embeddings(item: Any, *, row_newlines: bool) -> int:
    # What DeepseekOCR(2)ForCausalLM._pixel_values_to_embedding yields for one processed image,
    # from its tensors' shapes: the global view's cells (a newline per row for OCR), the tiles'
    # cells when images_spatial_crop says tiled (one tile each of images_crop, else the split
    # fails), and the view separator. SAM's 16 px patches, then its 4x downsampling.
    def cells(side_px: int) -> int:
        return -(-(side_px // 16) // 4)

    newline = 1 if row_newlines else 0
    base = cells(int(item["pixel_values"].data.shape[-1]))
    columns, rows = (int(v) for v in item["images_spatial_crop"].data.tolist())
    crops = item["images_crop"].data
    tokens = base * (base + newline) + 1
    if columns > 1 or rows > 1:
        if int(crops.shape[0]) != columns * rows:
            raise ValueError(f"{crops.shape[0]} tiles for a {columns} x {rows} grid")
        cell = cells(int(crops.shape[-1]))
        tokens += (rows * cell) * (columns * cell + newline)
    return tokens


def _cohere2_vision_embeddings(item: Any, processor: Any) -> int:
    # The placeholder Cohere2VisionForConditionalGeneration's embeddings for one processed
    # image would fill: each tile the processor made, through the SigLIP tower's patches
    # (config.json's vision_config) and the projector's pixel shuffle (downsample_factor),
    # plus the markup around them (<|START_OF_IMG|>, a line break a tile, <|END_OF_IMG|>).
    config = processor.info.get_hf_config()
    pixels = item["pixel_values"].data
    side = int(pixels.shape[-1]) // int(config.vision_config.patch_size)
    features = (side // int(config.downsample_factor)) ** 2
    return 2 + int(pixels.shape[0]) * (features + 1)


# The embeddings the model makes of a processed image, where the HF processor's tiles can
# disagree with vLLM's count (kwargs that reach only the processor): a mismatch is vLLM's
# failure, at the model instead of the processor.
EMBEDDINGS: dict[str, Callable[[Any, Any], int]] = {
    "deepseek_ocr": lambda item, _: _deepseek_ocr_embeddings(item, row_newlines=True),
    "deepseek_ocr2": lambda item, _: _deepseek_ocr_embeddings(item, row_newlines=False),
    "deepseek_vl2": _deepseek_vl2_embeddings,
    "deepseek_vl2_uncropped": _deepseek_vl2_embeddings,
    "cohere2_vision": _cohere2_vision_embeddings,
}


def _phi4mm(processor: Any) -> Count:
    # Phi4MMMultiModalProcessor._get_prompt_updates.get_image_replacement_phi4mm: vLLM's own
    # get_num_image_tokens (its dynamic_hd read off the HF image processor); then the HF
    # processor's dynamic_preprocess, which refuses a resized side under 10 px (the stand-in
    # for the checkpoint's remote processor: not vLLM's code).
    info = processor.info
    hf = info.get_hf_processor()
    image_processor = hf.image_processor

    def count(width: int, height: int) -> int:
        tokens = int(
            info.get_num_image_tokens(image_width=width, image_height=height, processor=hf)
        )
        image_processor.dynamic_preprocess(_Sized(width, height), image_processor.dynamic_hd)
        return tokens

    return count


def _phi3v(processor: Any) -> Count:
    # Phi3VMultiModalProcessor._get_prompt_updates.get_replacement_phi3v: vLLM's
    # get_num_image_tokens, which is the HF processor's calc_num_image_tokens_from_image_size
    # (the stand-in for the checkpoint's remote processor: not vLLM's code). The processor
    # resizes each image to that transform's size first, and torchvision refuses a side of 0
    # px ("height and width must be > 0", as the full path on 16384 x 1 shows): the same
    # size, read off the stand-in's module, refused here too.
    info = processor.info
    hf = info.get_hf_processor()
    image_processor = hf.image_processor
    remote = sys.modules[type(image_processor).__module__]

    def count(width: int, height: int) -> int:
        tokens = int(
            info.get_num_image_tokens(image_width=width, image_height=height, processor=hf)
        )
        _, new_width, new_height = remote.hd_transform_size(
            width, height, hd_num=image_processor.num_crops
        )
        if min(new_width, new_height) <= 0:
            raise ValueError(f"height and width must be > 0: {new_width}x{new_height}")
        return tokens

    return count


def _cohere2_vision(processor: Any) -> Count:
    # Cohere2VisionMultiModalProcessor._get_prompt_updates.get_replacement: the tiles
    # info.get_num_patches counts (transformers' get_number_of_image_patches over the merged
    # kwargs), each patch_size**2 image tokens and a line break, between <|START_OF_IMG|> and
    # <|END_OF_IMG|>, encoded as vLLM encodes it.
    from vllm.multimodal.processing import cached_encode

    info = processor.info
    hf = info.get_hf_processor()
    tokenizer = info.get_tokenizer()
    tile = hf.image_token * int(hf.patch_size**2) + hf.img_line_break_token

    def count(width: int, height: int) -> int:
        tiles = info.get_num_patches(
            image_width=width, image_height=height, processor=hf, mm_kwargs={}
        )
        replacement = f"{hf.boi_token}{tile * tiles}{hf.eoi_token}"
        return len(cached_encode(tokenizer, replacement, add_special_tokens=False))

    return count


def _ernie45_vl(processor: Any) -> Count:
    # Ernie4_5VLMultiModalProcessor._get_prompt_updates.get_replacement_ernie45vl: the grid the
    # remote processor returns (a stand-in here: its _add_image's get_smarted_resize over the
    # processor's image_min_pixels / image_max_pixels) over spatial_conv_size**2, as vLLM reads
    # both off the HF processor. vLLM's own get_num_image_tokens serves its profiling only.
    hf = processor.info.get_hf_processor()

    def count(width: int, height: int) -> int:
        grid_h, grid_w = hf.image_processor.get_smarted_resize(
            height, width, min_pixels=hf.image_min_pixels, max_pixels=hf.image_max_pixels
        )[1]
        return (grid_h * grid_w) // hf.spatial_conv_size**2

    return count


def _step3_vl(processor: Any) -> Count:
    # Step3VLMultiModalProcessor._get_prompt_updates.get_replacement_step1o: the replacement
    # ids over the windows the HF processor's ImagePatcher cut (num_patches and
    # patch_newline_mask). Here the patcher's own get_num_patches, its window count and rows
    # for the size alone (the full path checks it against the cut), and the newline mask as
    # __call__ builds it: the end of each row of x_num windows but the last. The image
    # processor is the one the request's kwargs build (none here), as vLLM builds it.
    info = processor.info
    hf = info.get_hf_processor()
    patcher = hf.image_processor.patcher

    def count(width: int, height: int) -> int:
        windows, rows_less_one = patcher.get_num_patches(width, height)
        columns = windows // (rows_less_one + 1) if windows else 0
        mask = [(index + 1) % columns == 0 for index in range(windows)] if windows else []
        if mask:
            mask[-1] = False
        assert sum(mask) == rows_less_one, (windows, rows_less_one, mask)
        return len(hf.get_image_repl_feature_ids(1, windows, mask))

    return count


COUNTS: dict[str, Callable[[Any], Count]] = {
    "ernie45_vl": _ernie45_vl,
    "cohere2_vision": _cohere2_vision,
    "step3_vl": _step3_vl,
    "phi4mm": _phi4mm,
    "phi3v": _phi3v,
    "deepseek_ocr": _deepseek_ocr,
    "deepseek_ocr2": _deepseek_ocr,
    "deepseek_vl2": _deepseek_vl2(cropping=True),
    "deepseek_vl2_uncropped": _deepseek_vl2(cropping=False),
    "minicpmv4_6": _minicpmv4_6,
    "minicpmv4_6-image-12": lambda processor: _minicpmv4_6(processor, image_index=12),
    "minicpmv": _minicpmv,
    "minicpmv-image-10": lambda processor: _minicpmv(processor, image_index=10),
    "lfm2_vl": _lfm2_vl,
    "kimi_vl": _kimi_vl,
    "keye": _keye,
    "kimi_k25": _kimi_k25,
    "ovis2_5": _ovis2_5,
    "nvlm_d": _nvlm_d,
    "nemotron_vl": _nemotron_vl,
    "nano_nemotron_vl": _nano_nemotron_vl,
    "h2ovl": _h2ovl,
    "paddleocr_vl": _image_processor_info,
    "qwen_vl": _image_processor_info,
    "image_repl": _image_repl,
    "prompt_update": _prompt_update,
    "molmo2": _molmo2,
    "info": _info,
    "gemma4": _gemma4,
    "internvl_style": _internvl_style,
}


# Where vLLM's count depends on the rest of the request: the most any request can give an image.
MOSTS: dict[str, Callable[[Any], Count]] = {"nano_nemotron_vl": _nano_nemotron_vl_most}


def _answer(call: Callable[[], int]) -> int | str:
    try:
        return call()
    except Exception as exc:  # vLLM's refusal is the answer
        return f"error: {type(exc).__name__}: {exc}"[:300]


def _applied(
    processor: Any,
    prompt: str,
    width: int,
    height: int,
    count: str = "",
    images: int = 1,
    modality: str = "image",
) -> int:
    # With ``images`` > 1 the prompt repeats ``images`` times, one copy of the image behind
    # each, and the last image's placeholder is the answer (where the count depends on the
    # image's place, or, as DeepSeek-VL2's cropping, on how many images the prompt holds).
    blank = Image.new("RGB", (width, height))
    # Kimi-K2.5's unified modality: vLLM's chat parser wraps each image as a vision chunk.
    item = {"type": "image", "image": blank, "uuid": None} if modality == "vision_chunk" else blank
    items = processor.info.parse_mm_data({modality: [item] * images})
    processed = processor(" ".join([prompt] * images), items)
    length = int(processed["mm_placeholders"][modality][-1].length)
    if count in EMBEDDINGS:
        embeddings = EMBEDDINGS[count](processed["mm_kwargs"]["image"][-1], processor)
        if embeddings != length:
            raise ValueError(f"the model's {embeddings} embeddings for {length} placeholders")
    return length


def _applied_together(processor: Any, prompt: str, sizes: list[list[int]]) -> list[int] | str:
    # Several images in one prompt, processed in one call: each one's placeholder length.
    images = [Image.new("RGB", (width, height)) for width, height in sizes]
    items = processor.info.parse_mm_data({"image": images})
    try:
        placeholders = processor(" ".join([prompt] * len(images)), items)["mm_placeholders"]
    except Exception as exc:  # vLLM's refusal is the answer
        return f"error: {type(exc).__name__}: {exc}"[:300]
    return [int(placeholder.length) for placeholder in placeholders["image"]]


def run_family(family: dict[str, Any]) -> dict[str, Any]:
    from vllm.config import ModelConfig
    from vllm.multimodal import MULTIMODAL_REGISTRY

    started = time.perf_counter()
    try:
        model_config = ModelConfig(
            model=family["directory"],
            tokenizer=family["directory"],
            max_model_len=family.get("max_model_len", 32768),
            trust_remote_code=family.get("trust_remote_code", True),
            limit_mm_per_prompt={"image": max(4, family.get("images", 1)), "video": 0},
            mm_processor_kwargs=family.get("mm_processor_kwargs") or None,
        )
        processor = MULTIMODAL_REGISTRY.create_processor(model_config)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"[:500]}
    try:
        count = COUNTS[family["count"]](processor)
    except Exception as exc:  # vLLM's processor refuses its own configuration
        refusal = f"error: {type(exc).__name__}: {exc}"[:300]
        count = None
    counts = [
        refusal if count is None else _answer(lambda w=w, h=h: count(w, h))
        for w, h in family["sizes"]
    ]
    counted = time.perf_counter()
    applied = [
        _answer(
            lambda w=w, h=h: _applied(
                processor,
                family["prompt"],
                w,
                h,
                family["count"],
                family.get("images", 1),
                family.get("modality", "image"),
            )
        )
        for w, h in family["apply"]
    ]
    most = (
        [_answer(lambda w=w, h=h: most_count(w, h)) for w, h in family["most_sizes"]]
        if family.get("most_sizes") and (most_count := MOSTS[family["count"]](processor))
        else []
    )
    together = [
        _applied_together(processor, family["prompt"], group) for group in family.get("groups", [])
    ]
    return {
        "counts": counts,
        "apply": applied,
        "together": together,
        "most": most,
        "seconds": time.perf_counter() - started,
        "apply_seconds": time.perf_counter() - counted,
    }


def main(spec_path: str, answers_path: str) -> None:
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")  # before vLLM is imported
    with open(spec_path, encoding="utf-8") as spec_file:
        spec = json.load(spec_file)
    answers = {family["name"]: run_family(family) for family in spec["families"]}
    with open(answers_path, "w", encoding="utf-8") as answers_file:
        json.dump(answers, answers_file)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
