"""The embedded store's data-link key: generated once, kept in the data directory (0600), reused on restart, so
links a local server signed keep working after it restarts."""

from __future__ import annotations

import contextlib
import os
import secrets
import threading
from pathlib import Path

KEY_FILE = "data-link.key"
_lock = threading.Lock()
_keys: dict[Path, str] = {}


def _read(path: Path) -> str:
    key = path.read_text(encoding="ascii").strip()
    if not key:
        raise RuntimeError(f"{path} is empty: delete it (links signed before will stop working) and restart")
    return key


def _create(path: Path) -> str:
    """Write a new key beside `path`, then link it into place: no reader ever sees a partial file, and when two
    processes race, the first link wins and both use its key."""
    key = secrets.token_urlsafe(32)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "w", encoding="ascii") as out:
            out.write(key + "\n")
            out.flush()
            os.fsync(out.fileno())
        try:
            os.link(temporary, path)
        except FileExistsError:
            return _read(path)
        return key
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)


def data_link_key(data_dir: str | Path) -> str:
    """The key kept in `data_dir` (created there, mode 0600, on first use); read once per process."""
    directory = Path(data_dir).expanduser().resolve()
    with _lock:
        if directory not in _keys:
            directory.mkdir(parents=True, exist_ok=True)
            path = directory / KEY_FILE
            _keys[directory] = _read(path) if path.exists() else _create(path)
        return _keys[directory]
