"""The embedded store's persisted data-link key and `DataLinks.refresh` (which links it re-signs)."""

from __future__ import annotations

import stat
import threading
from pathlib import Path

import pytest

from agent_core.store import link_key
from agent_core.tools.data_links import DataLinks, data_link
from agent_core.tools.data_token import DataTokenError, verify_data_token
from tests.support.fixtures import make_settings

SECRET = "unit-secret-data-link-key-32-bytes"


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(link_key, "_keys", {})  # each test reads its directory as a new process would


def test_the_key_is_created_private_and_reused(tmp_path: Path) -> None:
    directory = tmp_path / "data"
    key = link_key.data_link_key(directory)
    path = directory / link_key.KEY_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and path.read_text().strip() == key
    link_key._keys.clear()  # a restart
    assert link_key.data_link_key(directory) == key
    assert [p.name for p in directory.iterdir()] == [link_key.KEY_FILE]  # no temporary file left behind


def test_racing_processes_agree_on_one_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Every racer writes its own key and links it into place: exactly one link wins, all use its key
    barrier = threading.Barrier(4)
    real_create = link_key._create

    def create(path: Path) -> str:
        barrier.wait()
        return real_create(path)

    monkeypatch.setattr(link_key, "_create", create)
    keys: list[str] = []

    def racer() -> None:
        path = tmp_path / link_key.KEY_FILE
        keys.append(create(path))

    threads = [threading.Thread(target=racer) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(keys)) == 1 and (tmp_path / link_key.KEY_FILE).read_text().strip() == keys[0]


def test_embedded_settings_sign_with_the_directorys_key(tmp_path: Path) -> None:
    settings = make_settings(AGENT_STORAGE="embedded", AGENT_DATA_DIR=str(tmp_path))
    assert settings.data_token_key() == (tmp_path / link_key.KEY_FILE).read_text().strip()
    # An explicit secret (the deployed path: env or Secrets Manager) always wins, and writes no file
    other = tmp_path / "other"
    explicit = make_settings(AGENT_STORAGE="embedded", AGENT_DATA_DIR=str(other), AGENT_DATA_TOKEN_SECRET=SECRET)
    assert explicit.data_token_key() == SECRET and not other.exists()


def test_refresh_re_signs_only_links_to_the_chat_being_read() -> None:
    links = DataLinks(make_settings(AGENT_DATA_TOKEN_SECRET=SECRET), clock=lambda: 1000.0)
    own = data_link("c_1/notes.txt", "stale.token", "https://api.example/prod")
    foreign = data_link("c_2/secret.txt", "forged.token")
    stored = {"result": {"file": "c_1/notes.txt", "url": own}, "text": f"[notes]({own}) and [x]({foreign})"}
    fresh = links.refresh(stored, "c_1")
    url = fresh["result"]["url"]
    assert url.startswith("https://api.example/prod/api/ap/data?file=c_1/notes.txt&t=") and url != own
    verify_data_token(SECRET, url.split("&t=")[1], "c_1", "c_1/notes.txt", 1000.0 + 3599)
    with pytest.raises(DataTokenError):
        verify_data_token(SECRET, url.split("&t=")[1], "c_1", "c_1/notes.txt", 1000.0 + 3600)
    assert f"[notes]({url})" in fresh["text"]
    assert f"[x]({foreign})" in fresh["text"]  # another chat's file: never signed by reading this chat
    assert stored["result"]["url"] == own  # the stored value is left as it was
