"""vLLM's ``--mm-processor-kwargs``, as ``SIDECAR_MM_PROCESSOR_KWARGS`` gives them.

vLLM merges the server's kwargs over the checkpoint's processor config on every call, so a
knob set there changes what each image costs: Gemma 4's ``max_soft_tokens``, InternVL's
``max_dynamic_patch``, the Qwen family's ``max_pixels``. The sidecar takes the same JSON
object and merges it over the same values before it builds the family's rule.

Each family names the knobs that reach its arithmetic (``PROCESSOR_KNOBS``); knobs that
only touch pixel values (``COUNT_NEUTRAL_KNOBS``: rescaling, normalisation, resampling)
change no count and pass. Anything else stops start-up: a knob the sidecar cannot price
would let unpriced work through. ``images_kwargs``, the processor's own scope for image
knobs, is read like the top level, which wins where both name a knob (vLLM's Gemma 4 reads
them in that order), except for the families whose vLLM processor reads the scope first
(``scoped_first``: MiniCPM-V 4.6 / 4.7). ``min_pixels``/``max_pixels`` are the same values as
``SIDECAR_MIN_PIXELS``/``SIDECAR_MAX_PIXELS``; setting one in both places with different
values is refused, since only one of them can be what vLLM runs with.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sidecar.errors import ConfigurationError
from sidecar.vision import SERVER_KWARGS

__all__ = ["SERVER_KWARGS", "ProcessorKwargs"]

PIXEL_KNOBS = frozenset({"min_pixels", "max_pixels"})

# Image-processor kwargs that change pixel values, never sizes or counts.
COUNT_NEUTRAL_KNOBS = frozenset(
    {
        "do_rescale",
        "rescale_factor",
        "do_normalize",
        "image_mean",
        "image_std",
        "do_convert_rgb",
        "resample",
        "return_tensors",
        "data_format",
        "input_data_format",
        "device",
    }
)

IMAGES_SCOPE = "images_kwargs"


@dataclass(frozen=True, slots=True)
class ProcessorKwargs:
    """The server's ``--mm-processor-kwargs``, with the pixel bounds read out of them."""

    values: Mapping[str, Any]
    min_pixels: int | None = None
    max_pixels: int | None = None
    scoped: Mapping[str, Any] = field(default_factory=dict)  # images_kwargs, as given

    @classmethod
    def from_settings_values(
        cls,
        kwargs: Mapping[str, Any],
        *,
        min_pixels: int | None = None,
        max_pixels: int | None = None,
    ) -> ProcessorKwargs:
        """Flatten ``images_kwargs`` and reconcile the pixel bounds with the separate settings."""
        scoped = kwargs.get(IMAGES_SCOPE) or {}
        if not isinstance(scoped, Mapping):
            raise ConfigurationError(
                f"SIDECAR_MM_PROCESSOR_KWARGS: {IMAGES_SCOPE} must be a JSON object, not {scoped!r}"
            )
        flat = {**scoped, **{k: v for k, v in kwargs.items() if k != IMAGES_SCOPE}}
        bounds = {
            "min_pixels": _bound("min_pixels", flat.pop("min_pixels", None), min_pixels),
            "max_pixels": _bound("max_pixels", flat.pop("max_pixels", None), max_pixels),
        }
        return cls(flat, **bounds, scoped=dict(scoped))

    def for_family(
        self,
        model: str,
        family: str,
        knobs: frozenset[str],
        *,
        knobs_only: bool = False,
        scoped_first: bool = False,
        top_level_only: bool = False,
        pixel_bounds: bool = True,
    ) -> dict[str, Any]:
        """The knobs that reach ``family``'s arithmetic; ConfigurationError for any it
        cannot price. Pixel bounds are not in the result: ``with_pixel_range`` applies them.

        ``knobs_only``: vLLM hands every kwarg to a constructor that takes ``knobs`` alone
        (InternVL's chat format and its relatives: ``profiles.KNOBS_ONLY``), so a count-neutral
        knob or a pixel bound fails there too.
        ``scoped_first``: where both name a knob, vLLM's processor reads ``images_kwargs``'.
        ``top_level_only``: vLLM's count reads the family's knobs at the top level only
        (LFM2-VL's grid) while its processor reads ``images_kwargs`` too, so a knob given
        there makes the two disagree: refused.
        ``pixel_bounds``: False where vLLM's count ignores ``min_pixels`` / ``max_pixels``
        (Cosmos 3 Edge, whose image processor reads ``size`` alone): either is refused, since
        what the deployment asks for is not what vLLM runs.
        """
        if not pixel_bounds and (self.min_pixels is not None or self.max_pixels is not None):
            raise ConfigurationError(
                f"model {model!r} ({family}): SIDECAR_MM_PROCESSOR_KWARGS (or "
                "SIDECAR_MIN/MAX_PIXELS) sets min_pixels / max_pixels, which vLLM 0.33 does not "
                "apply to this family (its image processor takes neither: ignored at the top "
                "level, every image fails under images_kwargs); set size "
                '{"shortest_edge": ..., "longest_edge": ...} instead'
            )
        scoped_knobs = knobs & self.scoped.keys()
        if top_level_only and scoped_knobs:
            raise ConfigurationError(
                f"model {model!r} ({family}): SIDECAR_MM_PROCESSOR_KWARGS sets "
                f"{', '.join(sorted(scoped_knobs))} under {IMAGES_SCOPE}, which vLLM's "
                "count for this family does not read (its processor does): set it at the top "
                "level"
            )
        tolerated = frozenset() if knobs_only else COUNT_NEUTRAL_KNOBS
        unknown = sorted(set(self.values) - knobs - tolerated)
        if knobs_only:
            bounds = {"min_pixels": self.min_pixels, "max_pixels": self.max_pixels}
            unknown += sorted(name for name, bound in bounds.items() if bound is not None)
        if unknown:
            accepted = ", ".join(sorted(knobs if knobs_only else knobs | PIXEL_KNOBS))
            neutral = (
                ""
                if knobs_only
                else f" (and the count-neutral {', '.join(sorted(COUNT_NEUTRAL_KNOBS))})"
            )
            raise ConfigurationError(
                f"model {model!r} ({family}): SIDECAR_MM_PROCESSOR_KWARGS (or "
                f"SIDECAR_MIN/MAX_PIXELS) sets {', '.join(unknown)}, which the sidecar cannot "
                f"price for this family; knobs it prices: {accepted or 'none'}{neutral}"
            )
        values = {**self.values, **self.scoped} if scoped_first else self.values
        return {k: v for k, v in values.items() if k in knobs}


def _bound(name: str, in_kwargs: object, setting: int | None) -> int | None:
    if in_kwargs is None:
        return setting
    if isinstance(in_kwargs, bool) or not isinstance(in_kwargs, int) or in_kwargs < 1:
        raise ConfigurationError(
            f"SIDECAR_MM_PROCESSOR_KWARGS: {name} must be a positive integer, not {in_kwargs!r}"
        )
    if setting is not None and setting != in_kwargs:
        raise ConfigurationError(
            f"SIDECAR_MM_PROCESSOR_KWARGS sets {name}={in_kwargs} but "
            f"SIDECAR_{name.upper()}={setting}; vLLM runs with one value: set it once"
        )
    return in_kwargs
