"""Candidate settings: the recorded ones (or the environment's) with ``--set`` applied.

The traffic log's header holds the settings it was recorded under, so ``--set X=...``
changes only X. Without a header (a log from elsewhere, a synthetic traffic) the base is
the environment's ``SIDECAR_*`` variables, as ``serve`` reads them, and the recorded model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import AliasChoices, ValidationError

from sidecar.errors import ConfigurationError
from sidecar.settings import Settings

_UNSET = frozenset({"", "unset", "none", "null"})


def field_for(variable: str) -> str:
    """``SIDECAR_MAX_PIXELS`` -> ``max_pixels``; ConfigurationError for an unknown name."""
    for field, info in Settings.model_fields.items():
        alias = info.validation_alias
        names = {Settings.env_name(field), "SIDECAR_" + field.upper()}
        if isinstance(alias, AliasChoices):  # a former name, still read
            names |= {str(choice) for choice in alias.choices}
        if variable in names:
            return field
    raise ConfigurationError(f"--set {variable}: not a SIDECAR_* setting")


def parse_assignments(assignments: Sequence[str]) -> dict[str, Any]:
    """``["SIDECAR_MAX_PIXELS=1003520", ...]`` -> ``{"max_pixels": "1003520"}``; an empty
    value, ``unset`` or ``none`` unsets an optional setting."""
    values: dict[str, Any] = {}
    for assignment in assignments:
        name, sep, value = assignment.partition("=")
        if not sep:
            raise ConfigurationError(f"--set {assignment!r}: expected SIDECAR_NAME=VALUE")
        field = field_for(name.strip())
        values[field] = None if value.strip().lower() in _UNSET else value.strip()
    return values


def candidate_settings(
    recorded: Mapping[str, Any] | None, changes: Mapping[str, Any], *, model: str | None
) -> Settings:
    """The recorded settings (else the environment's, with ``model`` as the fallback) with
    ``changes`` applied; ConfigurationError naming each bad variable."""
    try:
        if recorded is not None:
            return Settings.model_validate({**recorded, **changes})
        try:
            return Settings(**changes)
        except ValidationError:
            if model is None or "model" in changes:
                raise
            return Settings(**{"model": model, **changes})
    except ValidationError as exc:
        problems = "; ".join(
            f"SIDECAR_{'_'.join(str(p) for p in error['loc']).upper()}: {error['msg']}"
            for error in exc.errors()
        )
        raise ConfigurationError(f"invalid candidate settings: {problems}") from None


def changed(base: Settings, candidate: Settings) -> dict[str, Any]:
    """The variables whose values differ, as ``SIDECAR_NAME: value``."""
    was, now = base.model_dump(mode="json"), candidate.model_dump(mode="json")
    return {Settings.env_name(k): now[k] for k in now if now[k] != was.get(k)}


def replay_notes(settings: Settings, changes: Mapping[str, Any]) -> list[str]:
    """What the replay cannot model under these settings, said plainly."""
    notes = ["the saturation gate (SIDECAR_SATURATION_*) is not simulated"]
    if isinstance(settings.kv_budget_bytes, str):
        notes.append(
            "SIDECAR_KV_BUDGET_BYTES=auto follows vLLM's KV pool, which a replay cannot read: "
            "the in-flight budget is off here; set it in bytes"
        )
    if {"text_chars_per_token", "exact_text_tokens"} & set(changes):
        notes.append("text tokens are replayed as recorded; the text settings change nothing")
    if settings.max_request_prompt_tokens is None:
        notes.append(
            "prompt budget: the model's context length; live, vLLM's --max-model-len replaces "
            "it (set SIDECAR_MAX_REQUEST_PROMPT_TOKENS to replay that)"
        )
    notes.append(
        "output tokens are cut to the room the model's context leaves (live: vLLM's "
        "--max-model-len), as the proxy cuts them"
    )
    return notes
