"""cli.advise: ``replay`` and ``advise`` on a traffic log written by the real TrafficLog."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import orjson
import pytest

from sidecar.advisor import chart
from sidecar.observe.traffic_format import header_line
from tests.support.cli import run_cli
from tests.support.sidecars import QWEN
from tests.support.traffic_lines import COST_FIELDS, record_line

SIZES = [(4032, 3024), (1920, 1080), (1920, 1080), (640, 480), (640, 480), (64, 64)] * 3


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "traffic.jsonl"
    header = header_line({"model": QWEN}, 0.0)
    lines = [header] + [
        record_line({"id": f"r{n}", "t": n * 0.2}, {**COST_FIELDS, "img": [[w, h, "jpeg", "data"]]})
        for n, (w, h) in enumerate(SIZES)
    ]
    path.write_bytes(b"\n".join(orjson.dumps(line) for line in lines) + b"\n")
    return path


def test_replay_prints_the_report(log: Path) -> None:
    status, output = run_cli("replay", "--log", str(log), "--set", "SIDECAR_MAX_PIXELS=1003520")
    assert status == 0
    assert "changed: SIDECAR_MAX_PIXELS=1003520" in output
    assert "KV per request" in output
    assert "saturation gate" in output


def test_replay_json_is_the_contract(log: Path) -> None:
    status, output = run_cli(
        "replay",
        "--log",
        str(log),
        "--json",
        "--set",
        "SIDECAR_MAX_IMAGE_TOKENS=1024",
        "--set",
        "SIDECAR_OVER_BUDGET_ACTION=downscale",
    )
    assert status == 0
    summary = orjson.loads(output)
    assert {"requests", "decisions", "reasons", "kv_bytes_per_request"} <= set(summary)
    assert summary["requests"] == len(SIZES)
    assert summary["decisions"] == {"admit": 9, "downscale": 9, "wait": 0, "reject": 0}
    assert set(summary["kv_bytes_per_request"]) == {"p50", "p95", "p99"}


def test_advise_prints_the_table_env_and_helm_and_draws_the_chart(
    log: Path, tmp_path: Path
) -> None:
    png = tmp_path / "advise.png"
    status, output = run_cli(
        "advise",
        "--log",
        str(log),
        "--gpu-memory-gib",
        "80",
        "--target-downscaled-fraction",
        "0.2",
        "--chart",
        str(png),
    )
    assert status == 0
    for text in (
        "Pareto front",
        "KV saved/req",
        "SIDECAR_KV_BUDGET_BYTES=",
        "images:",
        "maxPixels:",
        f"chart: {png}",
    ):
        assert text in output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_advise_json_and_tensor_parallel_gpus(log: Path) -> None:
    status, output = run_cli(
        "advise", "--log", str(log), "--gpu-memory-gib", "24", "--gpus", "2", "--json"
    )
    assert status == 0
    advice = orjson.loads(output)
    assert advice["recommended"]["max_concurrency"] > 0
    assert any("--gpus 2" in note for note in advice["notes"])


def test_the_chart_without_matplotlib_says_how_to_install_it(
    log: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = importlib.import_module

    def missing(name: str, package: str | None = None) -> object:
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real(name, package)

    monkeypatch.setattr(chart.importlib, "import_module", missing)
    monkeypatch.delitem(sys.modules, "matplotlib.pyplot", raising=False)
    status, _ = run_cli(
        "advise", "--log", str(log), "--gpu-memory-gib", "80", "--chart", str(tmp_path / "x.png")
    )
    assert status == 2
    assert "pip install 'vlm-sidecar[plot]'" in capsys.readouterr().err
    assert not (tmp_path / "x.png").exists()


def test_errors_name_the_problem(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli("replay", "--log", str(log.with_name("none.jsonl")))[0] == 2
    assert "no such file" in capsys.readouterr().err
    assert run_cli("replay", "--log", str(log), "--set", "SIDECAR_MAX_PIXELS=lots")[0] == 2
    assert "SIDECAR_MAX_PIXELS" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # argparse's own exit, status 2
        run_cli("advise", "--log", str(log), "--gpu-memory-gib", "80", "--jobs", "0")
    assert "'0' is not a whole number of at least 1" in capsys.readouterr().err


def test_advise_answers_the_same_in_one_process_and_in_several(log: Path) -> None:
    args = ("advise", "--log", str(log), "--gpu-memory-gib", "80", "--json")
    assert run_cli(*args, "--jobs", "1") == run_cli(*args, "--jobs", "3")
