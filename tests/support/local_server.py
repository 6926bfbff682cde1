"""`agent-core serve` as a subprocess: the same command `make run` starts (embedded SQLite, offline model)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from tests.support.server import free_port
from tests.support.wait import accepts, poll_until


@contextmanager
def local_server(
    python: str = sys.executable, cwd: str | None = None, port: int | None = None, **env_overrides: str
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """Start the server (with `python`, in `cwd`, on `port` or a free one); its data lives in a fresh
    temporary directory unless AGENT_DATA_DIR is given (pass the same one, and the same port, to two servers
    in turn to test a restart behind one address)."""
    with ExitStack() as stack:
        if "AGENT_DATA_DIR" not in env_overrides:
            env_overrides["AGENT_DATA_DIR"] = stack.enter_context(tempfile.TemporaryDirectory(prefix="agent-core-"))
        yield from _serve(python, cwd, env_overrides, port or free_port())


def _serve(
    python: str, cwd: str | None, env_overrides: dict[str, str], port: int
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "OPENAI_", "AWS_"))}
    env.update(env_overrides)
    process = subprocess.Popen(
        [python, "-m", "agent_core.cli", "serve", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=cwd,
    )
    assert process.stdout is not None
    banner = process.stdout.readline()  # printed once storage is up, before the socket opens
    if f"127.0.0.1:{port}" not in banner:
        process.kill()
        _, stderr = process.communicate(timeout=10)
        raise AssertionError(f"the server did not start: {banner}{stderr[-3000:]}")
    poll_until(lambda: accepts(port), f"the server accepts on port {port}", interval_s=0.05)
    try:
        yield f"http://127.0.0.1:{port}", process
    finally:
        if process.poll() is None:
            process.terminate()
            process.communicate(timeout=10)
