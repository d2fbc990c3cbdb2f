"""Gemma 3: every image is resized to one square and costs the same framed run of soft tokens.

``Gemma3ImageProcessor`` resizes any image to ``size`` (896 x 896) and the vision tower pools
it to ``image_seq_length`` (256) soft tokens. ``Gemma3Processor`` replaces each
``<start_of_image>`` the chat template emits with
``"\\n\\n<start_of_image>" + 256 x <image_soft_token> + "<end_of_image>\\n\\n"``; Gemma's
tokenizer spells ``"\\n\\n"`` as one token, so the placeholder becomes 256 + 4 = 260 positions.
That count is what the processor inserts on its own. Next to a newline in the template the
tokenizer merges the newlines (vLLM's ``Gemma3MultiModalProcessor`` repeats that merge), so a
real prompt can be one or two positions shorter: the prediction errs on the safe side.

Pan-and-scan (``do_pan_and_scan``, off unless configured) adds crops framed by prose whose
length depends on the tokenizer; a configuration that turns it on is refused, not guessed.

Gemma 3n (``gemma3n_mm.py``) frames its soft tokens the same way (``Gemma3nProcessor``'s
``full_image_sequence``) and merges newlines the same way; it resizes to 768 x 768 for its
MobileNet tower, has no pan-and-scan, and takes ``image_seq_length`` (256) from
``processor_config.json``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sidecar.vision import ImageTokens
from sidecar.vision.fixed import FixedCostDownscale

# "\n\n", <start_of_image>, <end_of_image> and "\n\n" around the soft tokens.
GEMMA3_FRAME_TOKENS = 4


@dataclass(frozen=True, slots=True)
class Gemma3Rule(FixedCostDownscale):
    """A fixed 896 x 896 resize: ``image_seq_length`` soft tokens plus their frame."""

    family: str
    image_seq_length: int
    image_side_px: int
    frame_tokens: int = GEMMA3_FRAME_TOKENS
    wrapper_tokens: int = 0  # the template's <start_of_image> is replaced, not wrapped

    @classmethod
    def from_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> Gemma3Rule:
        """Build from ``config.json`` and the (pre)processor config values."""
        if preprocessor.get("do_pan_and_scan"):
            raise ValueError(
                "Gemma 3 pan-and-scan adds crops whose framing text depends on the tokenizer; "
                "the sidecar supports do_pan_and_scan off (the default) only"
            )
        # processor_config.json names image_seq_length; config.json names the same number
        # mm_tokens_per_image.
        seq_length = preprocessor.get("image_seq_length") or config.get("mm_tokens_per_image")
        size = preprocessor.get("size") or {}
        side = size.get("height") or (config.get("vision_config") or {}).get("image_size")
        if seq_length is None or side is None:
            raise ValueError("Gemma 3 config has no image_seq_length or image size")
        return cls(family, int(seq_length), int(side))

    @classmethod
    def from_gemma3n_configs(
        cls, family: str, config: dict[str, Any], preprocessor: dict[str, Any]
    ) -> Gemma3Rule:
        """Gemma 3n: ``Gemma3nProcessor.image_seq_length`` soft tokens (its default 256)."""
        seq_length = preprocessor.get("image_seq_length") or 256
        size = preprocessor.get("size") or {}
        return cls(family, int(seq_length), int(size.get("height") or 768))

    @property
    def tokens_per_image(self) -> int:
        """Positions one image takes in place of its placeholder."""
        return self.image_seq_length + self.frame_tokens

    def image_tokens(self, width_px: int, height_px: int) -> ImageTokens:
        return ImageTokens(tokens=self.tokens_per_image, wrapper_tokens=self.wrapper_tokens)

    def max_image_tokens(self) -> ImageTokens:
        return ImageTokens(tokens=self.tokens_per_image, wrapper_tokens=self.wrapper_tokens)

    def describe(self) -> str:
        return (
            f"resize to {self.image_side_px}x{self.image_side_px} px; "
            f"{self.image_seq_length} soft tokens + {self.frame_tokens} framing "
            f"= {self.tokens_per_image} per image"
        )
