"""`agent-core chat` follows a run across dropped connections (RunFollower): each event once, in order."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agent_core.chat_client import RESUME_TRIES, ApiError, RunFollower


def _event(seq: int, kind: str = "content.delta") -> dict[str, Any]:
    return {"type": kind, "seq": seq, "runId": "r1", "delta": f"<{seq}>"}


def _dropping(events: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    yield from events
    raise httpx.RemoteProtocolError("peer closed connection without sending complete message body")


class FakeApi:
    """run_events answers from a script: each call's events (or a transport error)."""

    def __init__(self, answers: list[list[dict[str, Any]] | Exception]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, int]] = []

    def run_events(self, run_id: str, after: int) -> Iterator[dict[str, Any]]:
        """A generator, as the real one: the request (and its failure) happens when it is read."""
        self.calls.append((run_id, after))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        yield from answer


def test_a_dropped_stream_resumes_after_the_last_event_and_shows_each_once() -> None:
    api = FakeApi([[_event(3), _event(4), _event(5, "run.complete")]])
    follower = RunFollower(api, sleep=lambda s: None)  # type: ignore[arg-type]
    got = list(follower.follow(_dropping([_event(1, "request.query"), _event(2)])))
    assert [e["seq"] for e in got] == [1, 2, 3, 4, 5]
    assert api.calls == [("r1", 2)]


def test_events_the_client_already_has_are_not_shown_again() -> None:
    api = FakeApi([[_event(2), _event(3), _event(4, "run.complete")]])
    follower = RunFollower(api, sleep=lambda s: None)  # type: ignore[arg-type]
    got = list(follower.follow(_dropping([_event(1, "request.query"), _event(2), _event(3)])))
    assert [e["seq"] for e in got] == [1, 2, 3, 4]


def test_a_stream_that_ends_early_is_resumed_twice_and_reconnects_back_off() -> None:
    slept: list[float] = []
    unreachable = httpx.ConnectError("connection refused")
    api = FakeApi([unreachable, _dropping([_event(3)]), [_event(4, "run.complete")]])  # type: ignore[list-item]
    follower = RunFollower(api, sleep=slept.append)  # type: ignore[arg-type]
    got = list(follower.follow(iter([_event(1, "request.query"), _event(2)])))  # ends without its terminal
    assert [e["seq"] for e in got] == [1, 2, 3, 4]
    assert api.calls == [("r1", 2), ("r1", 2), ("r1", 3)]
    assert slept == [0.2]  # one wait: after the reconnect that brought nothing


def test_it_gives_up_after_reconnects_that_bring_nothing() -> None:
    api = FakeApi([httpx.ConnectError("down")] * RESUME_TRIES)  # type: ignore[list-item]
    follower = RunFollower(api, sleep=lambda s: None)  # type: ignore[arg-type]
    got = list(follower.follow(_dropping([_event(1, "request.query")])))
    assert [e["seq"] for e in got] == [1]
    assert len(api.calls) == RESUME_TRIES  # every reconnect in a row brought nothing


def test_a_drop_before_the_run_started_is_the_callers_error() -> None:
    follower = RunFollower(FakeApi([]), sleep=lambda s: None)  # type: ignore[arg-type]
    with pytest.raises(httpx.RemoteProtocolError):
        list(follower.follow(_dropping([])))


def test_a_stream_the_server_cannot_continue_is_an_error() -> None:
    api = FakeApi([[{"type": "stream.error", "code": "resume_unavailable", "message": "the log is incomplete"}]])
    follower = RunFollower(api, sleep=lambda s: None)  # type: ignore[arg-type]
    with pytest.raises(ApiError) as raised:
        list(follower.follow(_dropping([_event(1, "request.query")])))
    assert raised.value.code == "resume_unavailable"
