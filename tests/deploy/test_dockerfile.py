"""The Dockerfile: hadolint-clean, multi-stage, non-root, read-only-root ready, and its build
context (what .dockerignore lets through) is enough to build the wheel."""

from __future__ import annotations

import fnmatch
import json
import re
import shutil
import sys
import zipfile
from pathlib import Path

import pytest

from sidecar.settings import Settings
from tests.support.deploy_rendering import render_chart, run, serving_pods, venv_tool
from tests.support.paths import ROOT

DOCKERFILE = ROOT / "Dockerfile"
INSTRUCTION = re.compile(r"^(?P<name>[A-Z]+)\s+(?P<rest>.*)$")


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    text = DOCKERFILE.read_text(encoding="utf-8")
    joined = re.sub(r"\\\n\s*", " ", "\n".join(
        line for line in text.splitlines() if not line.lstrip().startswith("#")
    ))  # fmt: skip
    found = []
    for line in joined.splitlines():
        match = INSTRUCTION.match(line.strip())
        if match:
            found.append((match["name"], match["rest"].strip()))
    return found


def runtime_stage() -> list[tuple[str, str]]:
    """The instructions of the last stage."""
    steps = instructions()
    last_from = max(i for i, (name, _) in enumerate(steps) if name == "FROM")
    return steps[last_from:]


def context_files() -> list[Path]:
    """The files .dockerignore lets into the build context (the subset of its syntax it uses:
    ordered patterns, ``!`` re-includes, a pattern also matching any parent directory, and a
    leading ``**/`` matching at any depth)."""
    rules = []
    for line in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            pattern = line.lstrip("!").rstrip("/")
            any_depth = pattern.startswith("**/")
            rules.append((line.startswith("!"), any_depth, pattern.removeprefix("**/")))
    kept = []
    # Dot-directories (.git, .venv, caches) are excluded by `*` and no `!` rule names one.
    tops = [top for top in ROOT.iterdir() if not top.name.startswith(".")]
    for path in sorted(p for top in tops for p in (top, *top.rglob("*"))):
        if not path.is_file():
            continue
        relative = path.relative_to(ROOT)
        candidates = [relative.as_posix(), *(p.as_posix() for p in relative.parents if p.name)]
        excluded = False
        for negate, any_depth, pattern in rules:
            names = [Path(c).name for c in candidates] if any_depth else candidates
            if any(fnmatch.fnmatchcase(name, pattern) for name in names):
                excluded = not negate
        if not excluded:
            kept.append(relative)
    return kept


def test_dockerfile_is_hadolint_clean() -> None:
    result = run([venv_tool("hadolint"), "--format", "json", DOCKERFILE])
    assert result.returncode == 0, json.dumps(json.loads(result.stdout or "[]"), indent=2)


def test_dockerfile_builds_a_wheel_then_runs_it_from_a_venv_in_slim_python() -> None:
    steps = instructions()
    stages = [rest for name, rest in steps if name == "FROM"]
    assert len(stages) == 2
    assert "ARG PYTHON_IMAGE=python:3.11-slim-bookworm" in [f"{n} {r}" for n, r in steps]
    assert all(stage.startswith("${PYTHON_IMAGE}") for stage in stages)
    build = " ".join(rest for name, rest in steps if name == "RUN")
    assert "pip wheel" in build
    assert "[dev]" not in build, "no dev dependencies in the image"
    assert '"${wheel}[otel]"' in build, "tracing needs the OpenTelemetry SDK in the image"
    copies = [rest for name, rest in runtime_stage() if name == "COPY"]
    assert copies == ["--from=build /opt/venv /opt/venv"]


def test_dockerfile_runs_as_a_numeric_non_root_user_without_runtime_writes() -> None:
    steps = runtime_stage()
    arguments = dict(
        rest.split("=", 1) for name, rest in steps if name == "ARG" and "=" in rest
    )  # fmt: skip
    (user,) = [rest for name, rest in steps if name == "USER"]
    uid = user.replace("${UID}", arguments["UID"]).split(":")[0]
    assert uid.isdigit()
    assert int(uid) > 0
    environment = " ".join(rest for name, rest in steps if name == "ENV")
    assert "PYTHONDONTWRITEBYTECODE=1" in environment
    # The pods run the image with the same UID and a read-only root filesystem.
    pod = serving_pods(render_chart())[0]
    assert pod.sidecar["securityContext"]["runAsUser"] == int(uid)


def test_dockerfile_entrypoint_serves_and_healthcheck_hits_healthz_on_the_metrics_port() -> None:
    steps = runtime_stage()
    exec_form = {name: json.loads(rest) for name, rest in steps if name in {"ENTRYPOINT", "CMD"}}
    assert exec_form["ENTRYPOINT"] + exec_form["CMD"] == ["vlm-sidecar", "serve"]
    (healthcheck,) = [rest for name, rest in steps if name == "HEALTHCHECK"]
    command = json.loads(healthcheck[healthcheck.index("CMD") + 3 :])
    defaults = Settings(model="unused")
    assert command[0] == "python"
    assert "/healthz" in command[-1]
    assert f"'SIDECAR_METRICS_PORT', '{defaults.metrics_port}'" in command[-1]
    (exposed,) = [rest for name, rest in steps if name == "EXPOSE"]
    assert exposed.split() == [str(defaults.port), str(defaults.metrics_port)]


def test_docker_build_context_has_what_the_copies_need_and_nothing_else() -> None:
    kept = context_files()
    tops = {path.parts[0] for path in kept}
    assert tops == {"pyproject.toml", "README.md", "sidecar"}
    assert not [path for path in kept if "__pycache__" in path.parts]
    copied = [rest for name, rest in instructions() if name == "COPY" and "--from" not in rest]
    for copy in copied:
        for source in copy.split()[:-1]:
            assert any(path.parts[0] == source for path in kept), f"COPY {source} is ignored"


@pytest.mark.slow
def test_docker_build_context_builds_the_sidecar_wheel(tmp_path: Path) -> None:
    context = tmp_path / "context"
    for relative in context_files():
        (context / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / relative, context / relative)
    wheels = tmp_path / "wheels"
    pip = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet"]
    result = run([*pip, "--wheel-dir", wheels, context])
    assert result.returncode == 0, result.stderr
    (wheel,) = wheels.glob("vlm_sidecar-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    assert "sidecar/settings.py" in names
    assert "sidecar/py.typed" in names
    assert not [name for name in names if name.startswith("tests/")]
    entry_points = next(name for name in names if name.endswith("entry_points.txt"))
    with zipfile.ZipFile(wheel) as archive:
        assert "vlm-sidecar = sidecar.__main__:main" in archive.read(entry_points).decode()
