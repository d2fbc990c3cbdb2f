"""A stand-in vLLM whose ``/tokenize`` counts images as a given rule does: an engine whose
processor is configured (or not) as the sidecar believes, for the ask-the-engine tests.
The counting itself is the stand-in's own (``sidecar.standin.replies.counting_images_by``)."""

from __future__ import annotations

from sidecar.standin.replies import counting_images_by

__all__ = ["counting_images_by"]
