"""The deployed artifacts, built on this machine and cached under .build/deployed/.

- The runtime: a Python of the Lambda runtime's version (3.12) in a virtual environment holding only what
  the managed runtime provides beside the interpreter: `awslambdaric` (the Runtime Interface Client) and
  `boto3`. Keyed by the interpreter and the package list; built once.
- The synthesized stack (`infra.app.build_app`, cdk-nag off) written to a cloud assembly whose assets are the
  deployed ones: the function code (the repository's `functions/` package) and the layer, bundled by
  `infra.layer_build` for this machine's architecture. CDK keys the layer asset by its fingerprint and skips
  bundling when that asset is already in the assembly, so the layer is rebuilt only when its inputs change.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import platform
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.layer_build import find_python

REPO_ROOT = Path(__file__).resolve().parents[3]
BUILD_DIR = REPO_ROOT / ".build" / "deployed"
RUNTIME_VERSION = "3.12"
# What Lambda's managed Python runtime provides beside the interpreter (the layer leaves boto3 out for it).
RUNTIME_PACKAGES = ("awslambdaric>=3", "boto3")
ARCHITECTURE = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "arm64", "arm64": "arm64"}[platform.machine().lower()]


@dataclass(frozen=True)
class Runtime:
    """The interpreter functions run on: `python` (a venv of the runtime's version) and how it was found."""

    python: Path
    version: str
    note: str

    @property
    def bin_dir(self) -> Path:
        return self.python.parent


def _ignore_build_dir() -> None:
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    marker = BUILD_DIR.parent / ".gitignore"
    if not marker.exists():
        marker.write_text("*\n")


@contextmanager
def exclusive() -> Iterator[None]:
    """Hold .build/deployed for one test session at a time: a second run (another worker or `make` target)
    waits instead of building, pruning or logging into the same folder concurrently."""
    _ignore_build_dir()
    with (BUILD_DIR / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def runtime(version: str = RUNTIME_VERSION) -> Runtime:
    """The runtime venv (created on first use): Python `version` with awslambdaric and boto3 only."""
    base = find_python(version)
    if base is None:
        base = sys.executable
        found = f"{sys.version_info.major}.{sys.version_info.minor}"
        note = f"no python{version} on this machine: functions run on this interpreter, Python {found}"
    else:
        note = f"python{version} ({base})"
    key = hashlib.sha256(repr((str(Path(base).resolve()), RUNTIME_PACKAGES)).encode()).hexdigest()[:12]
    venv = BUILD_DIR / f"runtime-{key}"
    python = venv / "bin" / "python"
    complete = venv / ".complete"
    if not complete.exists():
        _ignore_build_dir()
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([base, "-m", "venv", str(venv)], check=True)
        pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        subprocess.run([*pip, *RUNTIME_PACKAGES], check=True)
        complete.write_text(note + "\n")
    real = subprocess.run(
        [str(python), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        text=True,
        capture_output=True,
        check=True,
    ).stdout.strip()
    return Runtime(python=python, version=real, note=note)


@dataclass(frozen=True)
class Synthesis:
    """One synthesized stack: its template and the directory of its cloud assembly (the assets)."""

    template: dict[str, Any]
    outdir: Path

    def resources(self, type_: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.template["Resources"].items() if v["Type"] == type_}

    def asset_path(self, logical_id: str) -> Path:
        """The staged asset of a resource (function code, layer), from its `aws:asset:path` metadata."""
        return self.outdir / self.template["Resources"][logical_id]["Metadata"]["aws:asset:path"]


def synthesize(context: dict[str, Any], outdir: Path, *, bundle: bool = True) -> Synthesis:
    """`build_app` on `context`, written to `outdir`; `bundle=False` skips asset bundling (no layer build)."""
    import aws_cdk as cdk

    from infra.app import build_app

    _ignore_build_dir()
    full: dict[str, Any] = {"aws:cdk:enable-asset-metadata": True, **context}
    if not bundle:
        full["aws:cdk:bundling-stacks"] = []
    app = cdk.App(outdir=str(outdir), context=full, builtin_cloud_formation_validation=False)
    app, stack = build_app(app, nag=False)
    assembly = app.synth()
    template_file = outdir / assembly.get_stack_artifact(stack.artifact_id).template_file
    return Synthesis(template=json.loads(template_file.read_text()), outdir=outdir)


def prune_assets(outdir: Path, keep: list[Synthesis]) -> None:
    """Remove staged assets no kept template refers to (an old layer is ~50 MB; each agent_core edit makes one)."""
    used = {
        resource["Metadata"]["aws:asset:path"]
        for synthesis in keep
        for resource in synthesis.template["Resources"].values()
        if "aws:asset:path" in (resource.get("Metadata") or {})
    }
    for path in outdir.glob("asset.*"):
        if path.name not in used and path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
