"""The layer's bytecode step: compiled by the runtime's Python, recording the paths Lambda mounts it at."""

from __future__ import annotations

import marshal
import sys
import types
from pathlib import Path

from infra.layer_build import LAYER_MOUNT, _sourceless, _strip_bytecode, compile_bytecode, find_python

HERE_VERSION = f"{sys.version_info.major}.{sys.version_info.minor}"  # so this test can unmarshal the code
TAG = sys.implementation.cache_tag
PYC_HEADER = 16  # magic, flags, and the hash (or mtime and size) of an unchecked-hash .pyc


def _site(tmp_path: Path) -> Path:
    """A layer's python/ directory in a build directory: a third-party package and agent_core."""
    site = tmp_path / "build" / "layer" / "python"
    (site / "vendor" / "sub").mkdir(parents=True)
    (site / "agent_core").mkdir()
    (site / "vendor" / "__init__.py").write_text("")
    (site / "vendor" / "sub" / "mod.py").write_text("def fail():\n    raise RuntimeError('boom')\n")
    (site / "agent_core" / "core.py").write_text("class Thing:\n    def run(self):\n        return 1\n")
    (site / "top.py").write_text("X = 1\n")
    return site


def _code(pyc: Path) -> types.CodeType:
    data = pyc.read_bytes()
    code = marshal.loads(data[PYC_HEADER:])
    assert isinstance(code, types.CodeType)
    return code


def _filenames(code: types.CodeType) -> set[str]:
    """co_filename of a module's code and of every function and class body nested in it."""
    names = {code.co_filename}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _filenames(const)
    return names


def test_bytecode_records_the_lambda_mount_not_the_build_directory(tmp_path: Path) -> None:
    site = _site(tmp_path)
    python = find_python(HERE_VERSION)
    assert python is not None
    tag = compile_bytecode(site, python, HERE_VERSION)
    assert tag == TAG
    _sourceless(site, tag)
    _strip_bytecode(site, tag)

    # Third-party modules ship bytecode only, in place of their sources.
    assert not (site / "vendor" / "sub" / "mod.py").exists()
    assert _filenames(_code(site / "vendor" / "sub" / "mod.pyc")) == {f"{LAYER_MOUNT}/vendor/sub/mod.py"}
    assert _filenames(_code(site / "top.pyc")) == {f"{LAYER_MOUNT}/top.py"}
    # agent_core keeps its sources next to the cached bytecode; both name the mounted path.
    assert (site / "agent_core" / "core.py").exists()
    cached = site / "agent_core" / "__pycache__" / f"core.{tag}.pyc"
    assert _filenames(_code(cached)) == {f"{LAYER_MOUNT}/agent_core/core.py"}
    for pyc in site.rglob("*.pyc"):
        assert str(tmp_path).encode() not in pyc.read_bytes(), f"{pyc} records the build directory"


def test_a_traceback_from_the_layer_names_the_mounted_path(tmp_path: Path) -> None:
    site = _site(tmp_path)
    python = find_python(HERE_VERSION)
    tag = compile_bytecode(site, python, HERE_VERSION)
    assert tag is not None
    _sourceless(site, tag)
    namespace: dict[str, object] = {}
    exec(_code(site / "vendor" / "sub" / "mod.pyc"), namespace)
    fail = namespace["fail"]
    assert callable(fail)
    try:
        fail()
    except RuntimeError as exc:
        frames = [frame.f_code.co_filename for frame, _ in _walk(exc.__traceback__)]
    assert frames[-1] == f"{LAYER_MOUNT}/vendor/sub/mod.py"


def _walk(tb: types.TracebackType | None) -> list[tuple[types.FrameType, int]]:
    out = []
    while tb is not None:
        out.append((tb.tb_frame, tb.tb_lineno))
        tb = tb.tb_next
    return out


def test_without_the_runtime_python_nothing_is_compiled(tmp_path: Path) -> None:
    site = _site(tmp_path)
    assert compile_bytecode(site, None, "3.12") is None
    assert not list(site.rglob("*.pyc"))
