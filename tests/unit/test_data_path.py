"""Data file paths: traversal in every disguise is refused with 400 invalid_path."""

from __future__ import annotations

import pytest

from agent_core.tools.data_path import (
    InvalidPath,
    chat_data_prefix,
    data_file,
    data_key,
    normalize_data_name,
    normalize_data_path,
)


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "c1",
        "c1/",
        "../x",
        "c1/../../etc/passwd",
        "c1/..",
        "c1/./x",
        "/etc/passwd",
        "/c1/x",
        "c1\\..\\x",
        "c1/a\\b",
        "c1/%2e%2e/x",
        "c1/%2E%2E/x",
        "c1/%252e%252e/x",
        "c1/%25252e%25252e/x",
        "c1%2f..%2fx",
        "c1/..%2fx",
        "c1/x%5c..%5cy",
        "c1/a%00b",
        "c1/a\x00b",
        "c1/a\x01b",
        "c1/a\x7fb",
        "c1/a\nb",
        "c1/a\u202eb",
        "c1//x",
        "c1/x/",
        "c1/.hidden",
        "c1/dir/.hidden",
        "c1/a b",
        "c1/a%20b",
        "c1/100%",
        "c1/%ff",
        "c1/a/b/c",
        "c1/a:b",
        "c1/a*b",
        "c/1/x/y",
        "c.1/x",
        "c1?/x",
        "中/x",
        "c1/" + "x" * 129,
        "c1/" + "x/" * 300 + "y",
        "c1/％２ｅ/x",
    ],
)
def test_unsafe_paths_are_invalid(raw: str) -> None:
    with pytest.raises(InvalidPath) as info:
        normalize_data_path(raw)
    error = info.value
    assert (error.status, error.code, error.param) == (400, "invalid_path", "file")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("c1/report.csv", ("c1", "report.csv")),
        ("c_abc123/chart-1.png", ("c_abc123", "chart-1.png")),
        ("c1/charts/q1.png", ("c1", "charts/q1.png")),
        ("c1/报告_2024.txt", ("c1", "报告_2024.txt")),
        ("c1/name..txt", ("c1", "name..txt")),
        ("c1/x", ("c1", "x")),
    ],
)
def test_safe_paths_split_into_chat_and_name(raw: str, expected: tuple[str, str]) -> None:
    assert normalize_data_path(raw) == expected


def test_keys_and_names() -> None:
    assert data_key("c1", "charts/q1.png") == "data/c1/charts/q1.png"
    assert data_file("c1", "q1.png") == "c1/q1.png"
    assert chat_data_prefix("c1") == "data/c1/"
    assert normalize_data_name("dir/a.csv") == "dir/a.csv"
    with pytest.raises(InvalidPath):
        normalize_data_name("a/b/c.csv")
    with pytest.raises(InvalidPath):
        chat_data_prefix("")
