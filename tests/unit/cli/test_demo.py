"""cli.demo: ``vlm-sidecar demo`` runs a sidecar in front of the stand-in and prints what it
decided for a mixed workload."""

from __future__ import annotations

from tests.support.cli import run_cli


def test_demo_prints_what_the_sidecar_decided_for_the_mixed_workload() -> None:
    status, text = run_cli("demo", "--once", "--port", "0", "--metrics-port", "0")
    assert status == 0
    assert "NOT vLLM" in text
    rows = {line.split("  ")[0]: line for line in text.splitlines()}
    assert " downscale " in rows["4032x3024 phone photo"]
    assert " downscale " in rows["3840x2160 4K frame"]
    assert " admit " in rows["1920x1080 frame"]
    assert " 400 " in rows["corrupt payload"]
    assert "SIDECAR_MAX_IMAGES_PER_REQUEST is 4" in rows["6 images"]
    assert "cannot be rewritten" in rows["remote URL"]
