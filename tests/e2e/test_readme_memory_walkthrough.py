"""The README's "Memory, on a laptop" commands, run as written (bash, curl, python3) against the local server
with the offline model: the last answer shows what was remembered of "yesterday"."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.local_server import local_server

README = Path(__file__).resolve().parents[2] / "README.md"


def _walkthrough() -> str:
    section = README.read_text(encoding="utf-8").split("## Memory, on a laptop", 1)[1].split("\n## ", 1)[0]
    blocks = section.split("```bash\n")[1:]
    assert blocks[0].startswith("AGENT_ALLOW_CLOCK_OVERRIDE=true make run"), "the server's command comes first"
    return blocks[1].split("```", 1)[0]


@pytest.mark.skipif(shutil.which("curl") is None, reason="the README's commands use curl")
def test_the_readme_memory_walkthrough_works_offline_as_written(tmp_path: Path) -> None:
    script = _walkthrough()
    with local_server(AGENT_ALLOW_CLOCK_OVERRIDE="true") as (base, _process):
        port = base.rsplit(":", 1)[1]
        commands = script.replace("localhost:8000", f"localhost:{port}").replace("/tmp/", f"{tmp_path}/")
        done = subprocess.run(["bash", "-c", commands], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    last = done.stdout.split("[offline model] You said: 昨天我们聊了什么？", 1)
    assert len(last) == 2, done.stdout
    assert "Records for 昨天 (2026-01-07)" in last[1] and "我想四月去京都看樱花" in last[1] and "八千元" in last[1]
