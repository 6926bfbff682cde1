"""Build the agent-core Lambda layer locally, without Docker.

`python -m infra.layer_build OUT_DIR` (what `make layer` runs) and the CDK asset bundler share
`build_layer`: runtime dependencies from pyproject.toml `[project] dependencies` (the one list),
installed as Linux wheels for the runtime's Python and architecture, then the agent_core package,
then bytecode compiled by the same Python minor version as the runtime (when that interpreter is on
this machine), as unchecked-hash .pyc so Lambda's read-only /opt uses it despite zip timestamps.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = REPO_ROOT / "pyproject.toml"
AGENT_CORE_DIR = REPO_ROOT / "shared" / "agent_core"

# Provided by the Lambda Python runtime: left out of the layer unless boto3 is pinned.
RUNTIME_PROVIDED = ("boto3", "botocore", "s3transfer")
# Packaging tools never belong in a layer.
BUILD_TOOLS = ("pip", "setuptools", "wheel", "_distutils_hack", "pkg_resources")
# Lambda's Python 3.12+ runtimes run on Amazon Linux 2023 (glibc 2.34): every manylinux tag up to it.
MANYLINUX_TAGS = ("manylinux_2_34", "manylinux_2_28", "manylinux2014")
MACHINE = {"arm64": "aarch64", "x86_64": "x86_64"}
# Where Lambda mounts a layer's python/ directory: the path compiled bytecode records for its sources.
LAYER_MOUNT = "/opt/python"
# agent_core's local-only modules (paths under shared/agent_core), left out of the layer: the CLI and its
# terminal chat, the settings page generator, the embedded store (SQLite and data files), the local
# scheduler and the dev routes (served only when `Settings.dev_features`, never in Lambda). No Lambda code
# path imports them: the import-linter contract "Lambda code does not import local-only modules"
# (pyproject.toml) names the same modules, and tests/infra/test_layer_content.py holds the two together.
LOCAL_ONLY = (
    "cli.py",
    "chat_client.py",
    "settings_doc.py",
    "api/routes/dev.py",
    "jobs/local_scheduler.py",
    "store/embedded.py",
    "store/file_blob.py",
    "store/sqlite_db.py",
    "store/sqlite_jobs.py",
    "store/sqlite_table.py",
)


@dataclass(frozen=True)
class LayerRecipe:
    architecture: str = "arm64"  # arm64 | x86_64
    python_version: str = "3.12"
    boto3_version: str = ""  # empty: use the runtime's boto3

    @property
    def platforms(self) -> list[str]:
        return [f"{tag}_{MACHINE[self.architecture]}" for tag in MANYLINUX_TAGS]

    def requirements(self) -> list[str]:
        deps = runtime_dependencies()
        if self.boto3_version:
            deps = [d for d in deps if _dist_name(d) != "boto3"] + [f"boto3=={self.boto3_version}"]
        return deps

    def fingerprint(self) -> str:
        """A hash of everything the layer's content depends on: the asset hash (a rebuild only on change)."""
        digest = hashlib.sha256()
        digest.update(repr((self.architecture, self.python_version, self.requirements())).encode())
        digest.update(Path(__file__).read_bytes())
        for path in layer_sources():
            digest.update(str(path.relative_to(AGENT_CORE_DIR)).encode())
            digest.update(path.read_bytes())
        return digest.hexdigest()


@dataclass(frozen=True)
class LayerReport:
    size_bytes: int
    compiled_with: str | None


def layer_sources(package: Path = AGENT_CORE_DIR) -> list[Path]:
    """The files of agent_core the layer carries: all but bytecode caches and the local-only modules."""
    local_only = {package / name for name in LOCAL_ONLY}
    return [
        path
        for path in sorted(package.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc" and path not in local_only
    ]


def copy_agent_core(site: Path, package: Path = AGENT_CORE_DIR) -> None:
    """Copy agent_core's layer files (`layer_sources`) to `site/agent_core`."""
    for source in layer_sources(package):
        target = site / "agent_core" / source.relative_to(package)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)


def runtime_dependencies(pyproject: Path = PYPROJECT) -> list[str]:
    """`[project] dependencies` of pyproject.toml: the layer's requirements."""
    with pyproject.open("rb") as handle:
        return list(tomllib.load(handle)["project"]["dependencies"])


def _dist_name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9._-]+", requirement.strip())
    return _normalise(match.group(0) if match else requirement)


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def find_python(version: str) -> str | None:
    """An interpreter of exactly `version` (e.g. 3.12): this one, on PATH, or a pyenv installation."""
    candidates: list[str] = []
    if f"{sys.version_info.major}.{sys.version_info.minor}" == version:
        candidates.append(sys.executable)
    on_path = shutil.which(f"python{version}")
    if on_path:
        candidates.append(on_path)
    pyenv_root = os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    candidates += sorted(glob.glob(f"{pyenv_root}/versions/{version}.*/bin/python{version}"), reverse=True)
    probe = "import sys; print('%d.%d' % sys.version_info[:2])"
    for candidate in candidates:
        try:
            result = subprocess.run([candidate, "-c", probe], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            continue
        if result.returncode == 0 and result.stdout.strip() == version:
            return candidate
    return None


def _remove_distributions(site: Path, names: tuple[str, ...]) -> None:
    wanted = {_normalise(n) for n in names}
    for entry in list(site.iterdir()):
        if entry.name.endswith((".dist-info", ".egg-info")):
            if _normalise(entry.name.split("-")[0]) in wanted:
                shutil.rmtree(entry)
        elif _normalise(entry.name.removesuffix(".py")) in wanted:
            if entry.is_dir():
                shutil.rmtree(entry)
            else:
                entry.unlink()


def _remove_type_stubs(site: Path) -> None:
    """Type stubs (`*.pyi`, `*-stubs` packages) serve type checkers, never the runtime."""
    for stub in site.rglob("*.pyi"):
        stub.unlink()
    for entry in site.iterdir():
        if entry.is_dir() and entry.name.endswith("-stubs"):
            shutil.rmtree(entry)


def _strip_bytecode(site: Path, keep_tag: str | None) -> None:
    """Remove .pyc files not built for the runtime (all of them when none were compiled)."""
    for pyc in site.rglob("__pycache__/*.pyc"):
        if keep_tag is None or f".{keep_tag}." not in pyc.name:
            pyc.unlink()
    for cache in sorted(site.rglob("__pycache__"), reverse=True):
        if cache.is_dir() and not any(cache.iterdir()):
            cache.rmdir()


def _sourceless(site: Path, tag: str) -> None:
    """Third-party packages ship bytecode only: each module's `.pyc` replaces its `.py` (a third of the size).

    Python imports a `module.pyc` lying where `module.py` would (the sourceless loader); the bytecode is
    compiled by the runtime's own Python version, unchecked-hash. agent_core keeps its sources (readable
    tracebacks for our own code).
    """
    for source in site.rglob("*.py"):
        if source.is_relative_to(site / "agent_core"):
            continue
        compiled = source.parent / "__pycache__" / f"{source.stem}.{tag}.pyc"
        if compiled.exists():
            compiled.replace(source.with_suffix(".pyc"))
            source.unlink()


def compile_bytecode(site: Path, python: str | None, python_version: str) -> str | None:
    """Compile `site` with `python` (the runtime's version) as unchecked-hash .pyc; the bytecode's cache tag.

    Each code object records its source as Lambda sees it (`-d /opt/python`: `/opt/python/pkg/mod.py`),
    not this machine's build directory, so tracebacks and `__file__`-relative lookups name real paths.
    """
    if python is None:
        return None
    compile_cmd = [python, "-m", "compileall", "-q", "-j", "0", "--invalidation-mode", "unchecked-hash"]
    compile_cmd += ["-d", LAYER_MOUNT]
    # Some wheels ship files that are not valid Python 3 (templates, fixtures): those stay uncompiled.
    subprocess.run([*compile_cmd, str(site)], check=False, stdout=subprocess.DEVNULL)
    return "cpython-" + python_version.replace(".", "")


def directory_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def build_layer(out_dir: Path, recipe: LayerRecipe, *, log: bool = True) -> LayerReport:
    """Write the layer's content to `out_dir/python` (the layout Lambda mounts at /opt/python)."""
    site = out_dir / "python"
    if site.exists():
        shutil.rmtree(site)
    site.mkdir(parents=True)

    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile"]
    pip += ["--target", str(site), "--implementation", "cp", "--python-version", recipe.python_version]
    pip += ["--only-binary=:all:", "--upgrade"]
    for platform in recipe.platforms:
        pip += ["--platform", platform]
    if log:
        print(f"layer: pip install {' '.join(recipe.requirements())} ({recipe.platforms[-1]})", file=sys.stderr)
    subprocess.run([*pip, *recipe.requirements()], check=True)

    if not recipe.boto3_version:
        _remove_distributions(site, RUNTIME_PROVIDED)
    _remove_distributions(site, BUILD_TOOLS)
    shutil.rmtree(site / "bin", ignore_errors=True)  # console scripts, with this machine's shebangs
    _remove_type_stubs(site)

    copy_agent_core(site)

    python = find_python(recipe.python_version)
    tag = compile_bytecode(site, python, recipe.python_version)
    if python is None and log:
        print(f"layer: no python{recipe.python_version} here; the layer ships without bytecode", file=sys.stderr)
    if tag is not None:
        _sourceless(site, tag)
    _strip_bytecode(site, tag)

    report = LayerReport(size_bytes=directory_size(out_dir), compiled_with=python)
    if log:
        print(f"layer: {report.size_bytes / 1e6:.1f} MB unzipped in {out_dir}", file=sys.stderr)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--architecture", choices=sorted(MACHINE), default="arm64")
    parser.add_argument("--python-version", default="3.12")
    parser.add_argument("--boto3-version", default="")
    args = parser.parse_args(argv)
    recipe = LayerRecipe(args.architecture, args.python_version, args.boto3_version)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    # The build directory is scratch space: keep it out of version control wherever it is.
    if not (args.out_dir.parent / ".gitignore").exists() and args.out_dir.parent != REPO_ROOT:
        (args.out_dir.parent / ".gitignore").write_text("*\n")
    report = build_layer(args.out_dir, recipe)
    print(f"{report.size_bytes} bytes unzipped; bytecode: {report.compiled_with or 'none'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
