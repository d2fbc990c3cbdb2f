"""The model and the factory type behind the ``make_sidecar`` fixture (``tests/conftest.py``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from sidecar.serve.server import RunningSidecar

QWEN = "Qwen/Qwen2.5-VL-7B-Instruct"  # the model every sidecar and stand-in serves by default
# What the tests' request bodies call it. A stand-in answers 404 to a model it does not serve,
# as vLLM does, so the tests' stand-ins serve QWEN under this name too (--served-model-name).
MODEL_ALIAS = "m"

SidecarFactory = Callable[..., Awaitable[RunningSidecar]]
"""``await make_sidecar(upstream_url=None, **settings)``: a running sidecar on free ports."""
