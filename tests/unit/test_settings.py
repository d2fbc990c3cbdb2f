"""settings: the values that need more than pydantic's own parsing."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from sidecar.settings import Settings, parse_objective_priorities


def test_parse_objective_priorities_reads_the_mapping_and_names_a_bad_item() -> None:
    mapping = {"chat": 10, "default": 0, "batch": -1}
    assert parse_objective_priorities(" chat=10, default=0,batch=-1,") == mapping
    assert parse_objective_priorities("") == {}
    with pytest.raises(ValueError, match="'batch'"):
        parse_objective_priorities("chat=10,batch")
    with pytest.raises(ValueError, match="'=3'"):
        parse_objective_priorities("=3")


def test_settings_refuse_an_objective_mapping_they_cannot_read() -> None:
    with pytest.raises(ValidationError, match="expected OBJECTIVE=INTEGER, got 'chat=high'"):
        Settings(model="m", objective_priorities="chat=high")
    assert Settings(model="m", objective_priorities="chat=10").objective_priorities == "chat=10"
