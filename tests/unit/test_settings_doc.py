"""docs/settings.md lists every setting as `Settings` declares it; the generator says how to catch up."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_core import settings_doc
from agent_core.config import Settings


def test_every_setting_has_a_variable_and_a_description() -> None:
    missing = [name for name, field in Settings.model_fields.items() if not (field.alias and field.description)]
    assert missing == [], "give each Field an alias= (its variable) and a description="


def test_the_settings_table_is_current() -> None:
    text = settings_doc.DOC.read_text(encoding="utf-8")
    assert settings_doc.updated(text) == text, f"docs/settings.md is out of date: run `{settings_doc.COMMAND}`"


def test_the_table_has_one_row_per_setting_with_type_and_default() -> None:
    table = settings_doc.render()
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == [f.alias for f in Settings.model_fields.values()]
    assert "| `AGENT_STORAGE` | `embedded` \\| `aws` \\| `memory` | `embedded` |" in table
    assert "| `AGENT_TOOLS_ALLOWED` | list (`a,b` or a JSON list) | `*` |" in table
    assert "| `AGENT_MAX_BODY_BYTES` | int, >= 1 | `1048576` |" in table
    assert "| `AGENT_PLAYGROUND_ENABLED` | bool | `false` |" in table
    assert "| `AGENT_WORK_QUEUE_URL` | str | (empty) |" in table


def test_the_generator_rewrites_a_stale_table_and_check_reports_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = tmp_path / "settings.md"
    doc.write_text(
        f"# Settings\n\nprose\n\n{settings_doc.BEGIN}\n| stale |\n{settings_doc.END}\n\nafter\n", encoding="utf-8"
    )
    assert settings_doc.main(["--doc", str(doc), "--check"]) == 1
    assert settings_doc.COMMAND in capsys.readouterr().err
    assert settings_doc.main(["--doc", str(doc)]) == 0
    text = doc.read_text(encoding="utf-8")
    assert text.startswith("# Settings\n\nprose\n\n") and text.endswith("\n\nafter\n") and "| stale |" not in text
    assert settings_doc.main(["--doc", str(doc), "--check"]) == 0


def test_a_document_without_markers_is_refused(tmp_path: Path) -> None:
    doc = tmp_path / "settings.md"
    doc.write_text("# Settings\n", encoding="utf-8")
    with pytest.raises(ValueError, match="markers"):
        settings_doc.main(["--doc", str(doc)])
