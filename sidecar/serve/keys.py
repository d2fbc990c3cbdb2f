"""The collaborators one sidecar shares between requests, each under its own typed key.

``make_app`` builds every one of them once and stores it on the traffic application;
handlers read only the keys they need. Nothing here is global.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import structlog
from aiohttp import web

from sidecar.admission.budgets import BudgetsInForce
from sidecar.admission.discipline import PriorityPolicy
from sidecar.admission.ledger import KvLedger
from sidecar.admission.saturation import SaturationGate
from sidecar.cost.pricer import Pricer
from sidecar.engine import EngineFacts
from sidecar.engine.calibration import EngineCalibration
from sidecar.observe.metrics import Metrics
from sidecar.observe.router_load import RouterLoadExposition
from sidecar.observe.tracing import Tracer
from sidecar.observe.traffic import TrafficLog
from sidecar.profiles import ModelProfile
from sidecar.profiles.kv_geometry import KvGeometry
from sidecar.serve.relay import Upstream
from sidecar.settings import Settings


@dataclass(slots=True)
class EngineView:
    """What vLLM last reported about itself (None until it has been read), and what it
    changes in pricing: the KV geometry in force and the context a request may fill."""

    kv: KvGeometry  # the profile's, in vLLM's block size unless SIDECAR_BLOCK_SIZE_TOKENS
    max_position_embeddings: int  # the context until vLLM's max_model_len is read
    facts: EngineFacts | None = None

    @property
    def context_tokens(self) -> int:
        """Prompt plus output tokens one sequence may hold: vLLM's ``max_model_len``."""
        reported = self.facts.max_model_len if self.facts is not None else None
        return reported or self.max_position_embeddings


@dataclass(slots=True)
class Drain:
    """Set on SIGTERM: readiness fails while in-flight responses finish."""

    draining: bool = False


SETTINGS = web.AppKey("settings", Settings)
PROFILE = web.AppKey("profile", ModelProfile)
BUDGETS = web.AppKey("budgets", BudgetsInForce)
LEDGER = web.AppKey("ledger", KvLedger)
PRIORITY_POLICY = web.AppKey("priority_policy", PriorityPolicy)
SATURATION = web.AppKey("saturation", SaturationGate)
PRICER = web.AppKey("pricer", Pricer)
METRICS = web.AppKey("metrics", Metrics)
LOGGER = web.AppKey("logger", structlog.typing.FilteringBoundLogger)
UPSTREAM = web.AppKey("upstream", Upstream)
RESIZE_POOL = web.AppKey("resize_pool", ThreadPoolExecutor)
ENGINE = web.AppKey("engine", EngineView)
CALIBRATION = web.AppKey("calibration", EngineCalibration)
DRAIN = web.AppKey("drain", Drain)
ROUTER_LOAD = web.AppKey("router_load", RouterLoadExposition)
TRAFFIC = web.AppKey("traffic", TrafficLog)
TRACER = web.AppKey("tracer", Tracer)
