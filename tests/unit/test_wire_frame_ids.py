"""Every wire's frames carry an id from which that wire resumes (`WireEncoder.frame_id`, `identified`)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from agent_core.domain.events import ContentDelta, ContentEnd, ContentStart, RunComplete
from agent_core.runtime.envelope import Envelope, envelope_from_wire
from agent_core.wires.ag_ui import AgUiEncoder
from agent_core.wires.encoder import identified, reencoded
from agent_core.wires.native import NativeEncoder

EVENTS = [
    ContentStart(content_id="m"),
    ContentDelta(content_id="m", delta="Hel"),
    ContentDelta(content_id="m", delta="lo"),
    ContentEnd(content_id="m"),
    RunComplete(finish_reason="stop", usage={"promptTokens": 1, "completionTokens": 2}),
]


def _envelopes() -> list[Envelope]:
    return [Envelope(event, seq, 1000 + seq, "run", "chat", "req") for seq, event in enumerate(EVENTS, 1)]


async def _iterate(envelopes: list[Envelope]) -> AsyncIterator[Envelope]:
    for envelope in envelopes:
        yield envelope


async def test_native_ids_are_seqs_and_other_wires_seq_dot_index() -> None:
    native = [f.id async for f in identified(NativeEncoder(), _iterate(_envelopes()))]
    assert native == ["1", "2", "3", "4", "5"]
    ag = [f.id async for f in identified(AgUiEncoder("thread", "r1"), _iterate(_envelopes()))]
    # RUN_STARTED before the first event; TEXT_MESSAGE_START and its first content from seq 1-2; the end
    assert ag[0] == "0.0" and ag[-1].startswith("5.") and len(set(ag)) == len(ag)
    seqs = [int(i.split(".")[0]) for i in ag]
    assert seqs == sorted(seqs)


async def test_a_wire_reencoded_from_the_log_continues_after_the_last_id_received() -> None:
    live = [f async for f in identified(AgUiEncoder("thread", "r1"), _iterate(_envelopes()))]
    logged = [envelope_from_wire(e.wire()) for e in _envelopes()]  # what the run's log gives back
    for cut in range(len(live)):
        rest = [f async for f in reencoded(AgUiEncoder("thread", "r1"), _iterate(logged), live[cut].id)]
        assert [f.id for f in rest] == [f.id for f in live[cut + 1 :]]
        assert [AgUiEncoder("t", "r").sse(f.frame) for f in rest] == [
            AgUiEncoder("t", "r").sse(f.frame) for f in live[cut + 1 :]
        ]
