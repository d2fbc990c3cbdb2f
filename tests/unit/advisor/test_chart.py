"""advisor.chart: the sweep drawn as a PNG, and a clear error where matplotlib is missing."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from sidecar.advisor import chart
from sidecar.errors import ConfigurationError
from tests.support.advice import advice


def test_write_chart_draws_a_png_of_the_sweep(tmp_path: Path) -> None:
    path = tmp_path / "sweep.png"
    chart.write_chart(advice(), path)
    with Image.open(path) as image:
        assert (image.format, image.size) == ("PNG", (750, 450))
        colours = image.convert("RGB").getcolors(maxcolors=1 << 16)
    assert colours is not None
    assert len(colours) > 20  # dots, the front, the star and the labels, not a blank canvas


def test_require_matplotlib_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.import_module

    def without_matplotlib(name: str, *args: Any) -> Any:
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real(name, *args)

    monkeypatch.setattr(chart.importlib, "import_module", without_matplotlib)
    with pytest.raises(ConfigurationError, match=r"pip install 'vlm-sidecar\[plot\]'"):
        chart.require_matplotlib()
