"""Where a request queues for the in-flight KV budget: its band, whether it is shed, its tenant.

``read_tags`` takes what the request says (the objective header in either spelling, the
body's ``priority``, the fairness header); ``classify`` applies the operator's rules
(``PriorityPolicy``, from ``Settings``). The traffic log records the tags, so a replay can
apply other rules with the same ``classify``. The order waiters are served in, given their
classes, is ``admission.fair_queue``:

* **Bands, strictly**: higher priority is served first.
* **Sheddable**: a negative objective priority. Such a request never waits: the ledger
  grants it at once when it fits and nobody waits, or refuses it (``ShedError``); the
  saturation gate refuses it at once.
* **Tenants**: fair between them within a band, by predicted KV bytes. Every request without
  the header is the tenant ``""``; with fairness off, every request is.
* **The body's priority** follows vLLM's sign (lower is served earlier): band ``-priority``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sidecar.body.lax_values import lax_int
from sidecar.settings import Settings, parse_objective_priorities

OBJECTIVE_HEADERS = ("x-gateway-inference-objective", "x-llm-d-inference-objective")
FAIRNESS_ID_HEADERS = ("x-gateway-inference-fairness-id", "x-llm-d-inference-fairness-id")
OTHER_BAND = "other"


@dataclass(frozen=True, slots=True)
class QueueClass:
    """Where a request queues: its band, whether it is shed rather than queued, its tenant."""

    priority: int = 0
    sheddable: bool = False
    tenant: str = ""


DEFAULT_CLASS = QueueClass()


@dataclass(frozen=True, slots=True)
class PriorityPolicy:
    """The operator's rules for classifying a request (from ``Settings``)."""

    objective_priorities: Mapping[str, int] = field(default_factory=dict)
    fairness: bool = True
    fairness_id_header: str = ""  # empty: the two standard headers
    trust_request_priority: bool = False

    @property
    def band_labels(self) -> tuple[str, ...]:
        """The ``band`` label values: each mapped priority and 0, highest first, then
        ``other`` (body priorities outside them), so the series are bounded by the mapping."""
        bands = sorted({0, *self.objective_priorities.values()}, reverse=True)
        return (*map(str, bands), OTHER_BAND)

    def band_label(self, priority: int) -> str:
        """``priority`` as a ``band`` label value."""
        if priority == 0 or priority in self.objective_priorities.values():
            return str(priority)
        return OTHER_BAND

    @classmethod
    def from_settings(cls, settings: Settings) -> PriorityPolicy:
        return cls(
            objective_priorities=parse_objective_priorities(settings.objective_priorities),
            fairness=settings.fairness,
            fairness_id_header=settings.fairness_id_header.strip().lower(),
            trust_request_priority=settings.trust_request_priority,
        )


@dataclass(frozen=True, slots=True)
class QueueTags:
    """What a request says about where it queues, before the operator's rules are applied:
    the traffic log records these, so a replay can apply other rules."""

    objective: str | None = None  # the objective header, either spelling
    body_priority: int | None = None  # the body's integer ``priority``, trusted or not
    tenant: str = ""  # the fairness header; empty: none


NO_TAGS = QueueTags()


def read_tags(
    headers: Mapping[str, str], body_priority: object, policy: PriorityPolicy
) -> QueueTags:
    """The tags of a request. ``headers`` must look names up case-insensitively (aiohttp's
    ``CIMultiDictProxy`` does)."""
    names = (policy.fairness_id_header,) if policy.fairness_id_header else FAIRNESS_ID_HEADERS
    tenant = next((value for name in names if (value := headers.get(name))), "")
    objective = next((value for name in OBJECTIVE_HEADERS if (value := headers.get(name))), None)
    priority = lax_int(body_priority)
    if objective is None and priority is None and not tenant:
        return NO_TAGS
    return QueueTags(None if objective is None else objective.strip(), priority, tenant)


def classify(tags: QueueTags, policy: PriorityPolicy) -> QueueClass:
    """The request's class under the operator's rules.

    The objective header wins: its priority comes from the operator's mapping (an objective
    not in it gets 0), and a negative one is sheddable. Otherwise a trusted body ``priority``
    is read with vLLM's sign (lower is served earlier), so the band is its negation; it
    orders the queue but never makes a request sheddable, since vLLM clients use positive
    values to mean "later", not "drop me". Without fairness every request is one tenant.
    """
    tenant = tags.tenant if policy.fairness else ""
    priority = 0
    if tags.objective is not None:
        priority = policy.objective_priorities.get(tags.objective, 0)
    elif policy.trust_request_priority and tags.body_priority is not None:
        priority = -tags.body_priority
        return QueueClass(priority, False, tenant) if priority or tenant else DEFAULT_CLASS
    if priority or tenant:
        return QueueClass(priority, priority < 0, tenant)
    return DEFAULT_CLASS  # one object: a replay tells the one-band case by identity
