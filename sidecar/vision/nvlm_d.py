"""NVLM-D: InternVL chat's tiler, each tile tagged in the text, the tags counted by the tokenizer.

vLLM 0.33 serves NVLM-D (``model_executor/models/nvlm_d.py``) with ``NVLMProcessor``
(``transformers_utils/processors/nvlm_d.py``), an ``InternVLChatProcessor`` whose image
processor is InternVL chat's own (``InternVLChatImageProcessor``, the same knobs, every server
kwarg handed to its constructor), so the tile count is ``InternVLChatRule``'s. Only the
replacement differs: for ``n`` tiles (thumbnail included) it is the text

    <Image> <tile_1> ctx x s  ...  <tile_{n-1}> ctx x s  [<tile_global_thumbnail> ctx x s] </Image>

(no spaces; ``ctx`` is ``<|vision_pad|>``, ``s`` the tokens per tile; the thumbnail tag when
``use_thumbnail``, so one tile without a thumbnail gets no tag and no context at all), encoded
by the checkpoint's tokenizer without special tokens, and then one encoded ``"\\n"``: the
prompt update's target is ``<image>\\n`` and its replacement ends with the newline.

The tags are plain text to most tokenizers ("<Image><tile" splits into several pieces), so the
count depends on the checkpoint's ``tokenizer.json``: the rule encodes each possible
replacement with it (the ``tokenizers`` library, as vLLM's fast tokenizer does) once, at
start-up, and prices an image by its tile count. A model directory without ``tokenizer.json``
cannot be priced and is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

from sidecar.vision import MODEL_DIRECTORY
from sidecar.vision.internvl_chat import InternVLChatRule

IMAGE_START = "<Image>"
IMAGE_END = "</Image>"
IMAGE_CONTEXT = "<|vision_pad|>"
THUMBNAIL_TAG = "<tile_global_thumbnail>"
NEWLINE = "\n"  # NVLMMultiModalProcessor appends its encoding after the replacement


def replacement_text(tiles: int, tokens_per_tile: int, *, use_thumbnail: bool) -> str:
    """``NVLMProcessor.get_image_repl(tiles)``'s text, before encoding."""
    tags = [f"<tile_{i}>" for i in range(1, tiles)]
    if use_thumbnail:
        tags.append(THUMBNAIL_TAG)
    # vLLM: context_size = num_features // num_patches, with num_features = tiles x s.
    context = IMAGE_CONTEXT * (tiles * tokens_per_tile // tiles)
    return IMAGE_START + "".join(tag + context for tag in tags) + IMAGE_END


@dataclass(frozen=True, slots=True)
class NVLMRule(InternVLChatRule):
    """InternVL chat's tiles; the replacement's length for each tile count, read at start-up."""

    # tokens_by_tiles[n]: the encoded replacement and newline for n tiles (index 0 unused).
    tokens_by_tiles: tuple[int, ...] = ()

    @classmethod
    def from_nvlm_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> NVLMRule:
        """``NVLMProcessingInfo``: InternVL chat's knobs (tile side ``vision_config.image_size``),
        and the model directory's tokenizer for the replacement's length."""
        directory = preprocessor.get(MODEL_DIRECTORY)
        tokenizer_file = None if directory is None else Path(directory) / "tokenizer.json"
        if tokenizer_file is None or not tokenizer_file.is_file():
            raise ValueError(
                "NVLM-D's image tokens depend on the checkpoint's tokenizer: the model "
                "directory needs its tokenizer.json"
            )
        tiler = InternVLChatRule.from_configs(family, config, preprocessor)
        tokenizer = Tokenizer.from_file(str(tokenizer_file))

        def encoded(text: str) -> int:
            return len(tokenizer.encode(text, add_special_tokens=False).ids)

        newline = encoded(NEWLINE)
        most = max(tiler.tile_counts())
        table = (
            0,
            *(
                encoded(
                    replacement_text(n, tiler.tokens_per_tile, use_thumbnail=tiler.use_thumbnail)
                )
                + newline
                for n in range(1, most + 1)
            ),
        )
        return cls.over(tiler, tokens_by_tiles=table)

    def tokens_for_tiles(self, tiles: int) -> int:
        return self.tokens_by_tiles[tiles]

    def describe(self) -> str:
        thumbnail = " + thumbnail" if self.use_thumbnail else ""
        return (
            f"{self.min_dynamic_patch}-{self.max_dynamic_patch} tiles of {self.image_size_px} px"
            f"{thumbnail}; {self.tokens_per_tile} <|vision_pad|> per tile, <tile_k> tags as the "
            f"tokenizer encodes them; up to {self.max_image_tokens().tokens:,}"
        )
