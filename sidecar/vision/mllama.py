"""Llama 3.2 Vision (mllama): the image stays one prompt token; its tiles live in cross-attention.

``MllamaProcessor`` leaves ``<|image|>`` in the prompt as a single token. The image itself is
fitted onto a canvas of up to ``max_image_tiles`` square tiles of ``size`` (560 px):
``get_optimal_tiled_canvas`` picks, among the tile arrangements ``w x h <= max_image_tiles``,
the smallest upscale if any canvas needs one, else the mildest downscale, the smaller area
breaking ties. Each tile yields ``(tile / patch)**2 + 1`` vision states (1600 patches plus a
class token, 1601), which the decoder's cross-attention layers cache as KV: that count is
``ImageTokens.cross_attention_tokens``.

vLLM 0.33 cannot serve this model: ``MllamaForConditionalGeneration`` is listed in
``_PREVIOUSLY_SUPPORTED_MODELS`` as supported until v0.10.2 (encoder-decoder models other than
Whisper went with the V0 engine), and the Transformers-backend fallback stops at start-up
because ``MllamaProcessor`` has no ``_get_num_multimodal_tokens`` (vLLM issue 27198,
transformers issue 41749). The rule therefore prices the image as vLLM <= 0.10.2 did: its
encoder prompt held ``tiles x 1601`` positions per image, padding tiles not included (the
Hugging Face model pads every image to ``max_image_tiles``). vLLM 0.10 counted only the last
run of images, the ones generated tokens attend to; summing every image is the same for one
image and an upper bound otherwise. ``kv_geometry`` caches the states in the cross-attention
layers the way V1's ``CrossAttentionSpec`` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sidecar.vision import ImageTokens
from sidecar.vision.fixed import FixedCostDownscale

MLLAMA_PROMPT_TOKENS = 1  # <|image|> stays in the prompt as it is


def optimal_canvas_tiles(
    width_px: int, height_px: int, *, max_tiles: int, tile_px: int
) -> tuple[int, int]:
    """(tiles across, tiles down) of transformers' ``get_optimal_tiled_canvas``."""
    candidates = []  # (scale, tiles, across, down) in transformers' order
    for down in range(1, max_tiles + 1):
        for across in range(1, max_tiles + 1):
            if down * across <= max_tiles:
                scale_h = down * tile_px / height_px
                scale_w = across * tile_px / width_px
                scale = scale_h if scale_w > scale_h else scale_w
                candidates.append((scale, down * across, across, down))
    upscales = [c[0] for c in candidates if c[0] >= 1]
    selected = min(upscales) if upscales else max(c[0] for c in candidates)
    # Among canvases with the selected scale the smallest wins, the first on a tie.
    _, _, across, down = min((c for c in candidates if c[0] == selected), key=lambda c: c[1])
    return across, down


@dataclass(frozen=True, slots=True)
class MllamaRule(FixedCostDownscale):
    """One prompt token; ``tiles x states_per_tile`` cross-attention states per image."""

    family: str
    tile_px: int
    max_tiles: int
    states_per_tile: int
    wrapper_tokens: int = 0

    @classmethod
    def from_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> MllamaRule:
        """Build from ``config.json`` and ``preprocessor_config.json`` values."""
        vision = config.get("vision_config") or {}
        tile = (preprocessor.get("size") or {}).get("height") or vision.get("image_size")
        max_tiles = preprocessor.get("max_image_tiles") or vision.get("max_num_tiles")
        patch = vision.get("patch_size")
        if tile is None or patch is None or not max_tiles or int(max_tiles) < 1:
            raise ValueError("Llama 3.2 Vision config has no tile size, max tiles or patch size")
        # The vision tower's patches per tile, plus its class token.
        states = (int(vision.get("image_size") or tile) // int(patch)) ** 2 + 1
        return cls(family, int(tile), int(max_tiles), states)

    def tiles(self, width_px: int, height_px: int) -> int:
        """Tiles of the canvas the processor fits the image onto."""
        across, down = optimal_canvas_tiles(
            width_px, height_px, max_tiles=self.max_tiles, tile_px=self.tile_px
        )
        return across * down

    def image_tokens(self, width_px: int, height_px: int) -> ImageTokens:
        return ImageTokens(
            tokens=MLLAMA_PROMPT_TOKENS,
            wrapper_tokens=self.wrapper_tokens,
            cross_attention_tokens=self.tiles(width_px, height_px) * self.states_per_tile,
        )

    def max_image_tokens(self) -> ImageTokens:
        return ImageTokens(
            tokens=MLLAMA_PROMPT_TOKENS,
            wrapper_tokens=self.wrapper_tokens,
            cross_attention_tokens=self.max_tiles * self.states_per_tile,
        )

    def describe(self) -> str:
        return (
            f"1 prompt token; up to {self.max_tiles} tiles of {self.tile_px} px, "
            f"{self.states_per_tile} cross-attention states per tile"
        )
