"""Compaction: when it runs, what the SUMMARY covers, idempotence, chaining and the race between two runs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from agent_core.domain.ids import sortable_id
from agent_core.domain.models import Chat, Kind, Message, Role, Run, RunStatus, ToolCall, Usage
from agent_core.llm.base import LlmDelta, LlmRequest
from agent_core.llm.offline import OfflineLlm
from agent_core.memory.compaction import CompactionPolicy, compact, fold_point
from agent_core.memory.window import group_units
from agent_core.store import items as it
from agent_core.store.memory_table import MemoryTable
from agent_core.store.schema import SK
from agent_core.store.table_store import TableStore

USER = "user-alice"
MODEL = "summary-model"
LEASE_MS = 60_000
T0 = 1_700_000_000_000
POLICY = CompactionPolicy(window=4, compact_after=6)


class ScriptedLlm:
    """Answers summarisation requests with scripted texts and records every request.

    With `gate_at`, each call waits until that many calls have arrived: concurrent compactions
    then all read the store before any of them writes.
    """

    def __init__(self, replies: list[str], gate_at: int = 0) -> None:
        self.replies = replies
        self.requests: list[LlmRequest] = []
        self.gate_at = gate_at
        self.gate = asyncio.Event()
        self.replied: dict[str, str] = {}  # by the calling task's name: which caller got which text

    async def stream(self, request: LlmRequest) -> AsyncIterator[LlmDelta]:
        self.requests.append(request)
        index = len(self.requests) - 1
        if self.gate_at:
            if len(self.requests) >= self.gate_at:
                self.gate.set()
            await self.gate.wait()
        reply = self.replies[min(index, len(self.replies) - 1)]
        task = asyncio.current_task()
        if task is not None:
            self.replied[task.get_name()] = reply
        yield LlmDelta(content=reply)
        yield LlmDelta(finish_reason="stop")
        yield LlmDelta(usage=Usage(prompt_tokens=10, completion_tokens=5))

    def prompt(self, index: int) -> str:
        """The user part (previous summary + transcript) of the index-th request."""
        return str(self.requests[index].messages[-1]["content"])


class Fixture:
    """A chat on an in-memory TableStore, with helpers to append finished turns."""

    def __init__(self) -> None:
        self.table = MemoryTable()
        self.store = TableStore(self.table)
        self.chat = Chat(chat_id="c_compact", user_id=USER, created_at=T0, last_activity_at=T0)
        self.clock = T0
        self.turns = 0

    async def create(self) -> Fixture:
        await self.store.create_chat(self.chat)
        return self

    def message(self, role: Role, content: str = "", **fields: Any) -> Message:
        self.clock += 1
        return Message(
            id=sortable_id(self.clock),
            chat_id=self.chat.chat_id,
            role=role,
            content=content,
            created_at=self.clock,
            **fields,
        )

    async def turn(self, first: Message, *rest: Message) -> list[Message]:
        """Store one finished turn: `first` (USER) through begin_turn, the rest through finish_turn."""
        self.turns += 1
        self.clock += 1
        run = Run(
            run_id=f"run-{self.turns}",
            chat_id=self.chat.chat_id,
            user_id=USER,
            request_id=f"req-{self.turns}",
            started_at=self.clock,
        )
        await self.store.begin_turn(self.chat, run, first, LEASE_MS)
        await self.store.finish_turn(run.model_copy(update={"status": RunStatus.COMPLETED}), list(rest), self.clock)
        return [first, *rest]

    async def chatter(self, pairs: int, start: int = 0) -> list[Message]:
        """`pairs` question/answer turns: 2 * pairs NORMAL messages."""
        out: list[Message] = []
        for i in range(start, start + pairs):
            out += await self.turn(
                self.message(Role.USER, f"Question {i} about topic {i}."),
                self.message(Role.ASSISTANT, f"Answer {i} on topic {i}."),
            )
        return out

    async def summary_items(self) -> int:
        page = await self.table.query(it.chat_pk(self.chat.chat_id))
        return sum(1 for i in page.items if i[SK] == it.SUMMARY)


async def setup() -> Fixture:
    return await Fixture().create()


# ---------------------------------------------------------------- when compaction runs


async def test_no_compaction_at_or_below_compact_after() -> None:
    # Given exactly compact_after NORMAL messages, plus DAILY_SUMMARY ones that do not count
    f = await setup()
    await f.chatter(2)
    await f.turn(f.message(Role.USER, "Question 3."), f.message(Role.ASSISTANT, "Daily: x", kind=Kind.DAILY_SUMMARY))
    await f.turn(f.message(Role.USER, "Question 4."), f.message(Role.ASSISTANT, "Daily: y", kind=Kind.DAILY_SUMMARY))
    normal = [m for m in await f.store.messages_between(f.chat.chat_id, None, None) if m.kind == Kind.NORMAL]
    assert len(normal) == POLICY.compact_after
    llm = ScriptedLlm(["never used"])

    # When compaction runs
    changed = await compact(f.store, llm, MODEL, f.chat.chat_id, POLICY)

    # Then nothing happens: no model call, no summary
    assert changed is False
    assert llm.requests == []
    assert await f.store.get_summary(f.chat.chat_id) is None


async def test_above_compact_after_a_summary_covers_all_but_the_last_window() -> None:
    # Given compact_after + 1 NORMAL messages (7: u a u a u a u)
    f = await setup()
    messages = await f.chatter(3)
    messages += await f.turn(f.message(Role.USER, "Question 3 about topic 3."))
    assert len(messages) == POLICY.compact_after + 1

    # When compaction runs with the offline (extractive) model
    changed = await compact(f.store, OfflineLlm(), MODEL, f.chat.chat_id, POLICY)

    # Then a first SUMMARY covers all but the last `window` messages
    assert changed is True
    summary = await f.store.get_summary(f.chat.chat_id)
    assert summary is not None
    folded = len(messages) - POLICY.window
    assert summary.covers_message_id == messages[folded - 1].id
    assert summary.covered_count == folded
    assert summary.version == 1
    assert "Question 0 about topic 0." in summary.content
    assert "Question 3" not in summary.content  # still in the window, not folded
    # And exactly the last `window` messages remain uncovered
    recent = await f.store.recent_messages(f.chat.chat_id, summary.covers_message_id, 100)
    assert recent.items == messages[folded:]


async def test_the_cut_never_separates_a_tool_call_from_its_results() -> None:
    # Given 11 messages where "all but the last 4" would cut between two tool results
    f = await setup()
    messages = await f.chatter(2)  # 0..3
    messages += await f.turn(
        f.message(Role.USER, "Weather in Oslo and Bergen?"),  # 4
        f.message(
            Role.ASSISTANT,
            tool_calls=[ToolCall(id="c1", name="weather", arguments="{}"), ToolCall(id="c2", name="weather")],
        ),  # 5
        f.message(Role.TOOL, "Oslo 3", tool_call_id="c1", tool_name="weather"),  # 6
        f.message(Role.TOOL, "Bergen 7", tool_call_id="c2", tool_name="weather"),  # 7 <- naive cut
        f.message(Role.ASSISTANT, "Oslo 3, Bergen 7."),  # 8
    )
    messages += await f.turn(f.message(Role.USER, "Thanks"), f.message(Role.ASSISTANT, "You are welcome."))
    assert len(messages) == 11 and messages[len(messages) - POLICY.window].role == Role.TOOL

    # When compaction runs
    changed = await compact(f.store, OfflineLlm(), MODEL, f.chat.chat_id, POLICY)

    # Then the fold stops before the assistant tool call: the call and both results stay uncovered
    assert changed is True
    summary = await f.store.get_summary(f.chat.chat_id)
    assert summary is not None
    assert summary.covers_message_id == messages[4].id
    assert summary.covered_count == 5
    recent = await f.store.recent_messages(f.chat.chat_id, summary.covers_message_id, 100)
    assert recent.items == messages[5:]
    assert group_units(recent.items)[0] == messages[5:8]
    # And the pure function agrees
    assert fold_point(messages, POLICY.window) == 5


def test_fold_point_edges() -> None:
    # Given short lists and lists that start with tool results
    f = Fixture()
    u = f.message(Role.USER, "u")
    t = f.message(Role.TOOL, "t", tool_call_id="x")

    # Then nothing is folded when everything fits, and a cut never lands on a TOOL message
    assert fold_point([u, u, u], 4) == 0
    assert fold_point([u, u, u, u, u], 4) == 1
    assert fold_point([t, t, t, t], 1) == 0
    call = f.message(Role.ASSISTANT, tool_calls=[ToolCall(id="x", name="n"), ToolCall(id="y", name="n")])
    assert fold_point([u, call, t, t, u], 2) == 1  # the naive cut (3) lands on a result: back to the call
    assert fold_point([u, u], 0) == 2


# ---------------------------------------------------------------- idempotence and chaining


async def test_running_compaction_twice_is_idempotent() -> None:
    # Given a chat that was just compacted
    f = await setup()
    await f.chatter(5)
    llm = ScriptedLlm(["first summary", "second summary"])
    assert await compact(f.store, llm, MODEL, f.chat.chat_id, POLICY) is True
    first = await f.store.get_summary(f.chat.chat_id)

    # When compaction runs again with nothing new
    changed = await compact(f.store, llm, MODEL, f.chat.chat_id, POLICY)

    # Then it changes nothing and does not call the model
    assert changed is False
    assert await f.store.get_summary(f.chat.chat_id) == first
    assert len(llm.requests) == 1
    assert await f.summary_items() == 1


async def test_the_previous_summary_is_fed_into_the_next_summarisation() -> None:
    # Given a first compaction
    f = await setup()
    first_batch = await f.chatter(4)  # 8 messages: folds 4
    llm = ScriptedLlm(["SUMMARY-ONE: the user asked about topics 0 and 1.", "SUMMARY-TWO"])
    assert await compact(f.store, llm, MODEL, f.chat.chat_id, POLICY) is True
    one = await f.store.get_summary(f.chat.chat_id)
    assert one is not None and one.content.startswith("SUMMARY-ONE") and one.covered_count == 4
    assert "Previous summary" not in llm.prompt(0)

    # When more messages arrive and compaction runs again
    second_batch = await f.chatter(2, start=4)  # 4 uncovered + 4 new = 8 > 6
    assert await compact(f.store, llm, MODEL, f.chat.chat_id, POLICY) is True

    # Then the request carried the previous summary and only the newly folded messages
    prompt = llm.prompt(1)
    assert prompt.startswith("Previous summary:\nSUMMARY-ONE: the user asked about topics 0 and 1.")
    assert "Question 2 about topic 2." in prompt and "Answer 3 on topic 3." in prompt
    assert "Question 0 about topic 0." not in prompt  # already in the previous summary
    assert "Question 4" not in prompt  # still in the window
    assert llm.requests[1].purpose == "summarize" and llm.requests[1].model == MODEL
    # And the new summary replaced the old one, chaining version and count
    two = await f.store.get_summary(f.chat.chat_id)
    assert two is not None
    assert two.content == "SUMMARY-TWO"
    assert two.version == 2
    assert two.covered_count == 8
    everything = first_batch + second_batch
    assert two.covers_message_id == everything[7].id
    assert await f.summary_items() == 1


async def test_raw_messages_are_kept_after_compaction() -> None:
    # Given a compacted chat
    f = await setup()
    messages = await f.chatter(6)
    assert await compact(f.store, OfflineLlm(), MODEL, f.chat.chat_id, POLICY) is True

    # When listing its messages
    page = await f.store.list_messages(f.chat.chat_id, USER, limit=100, cursor=None)

    # Then every raw message is still there, in order
    assert page.items == messages


# ---------------------------------------------------------------- the race

RACERS = ("compaction-1", "compaction-2")


async def _race(f: Fixture, llm: ScriptedLlm) -> list[bool]:
    """Two compactions of the chat at once, as tasks named for `llm.replied`."""
    tasks = [asyncio.create_task(compact(f.store, llm, MODEL, f.chat.chat_id, POLICY), name=n) for n in RACERS]
    return list(await asyncio.gather(*tasks))


def _winner(results: list[bool]) -> str:
    assert sorted(results) == [False, True]
    return RACERS[results.index(True)]


async def test_two_concurrent_compactions_one_wins_and_one_summary_exists() -> None:
    # Given a chat over the threshold, and a model that holds both callers until both have read the store
    f = await setup()
    await f.chatter(4)
    llm = ScriptedLlm(["summary by A", "summary by B"], gate_at=2)

    # When two compactions run at the same time (no summary yet: both expect "none")
    results = await _race(f, llm)

    # Then both summarised from the same state, exactly one wrote, and one SUMMARY item exists
    assert len(llm.requests) == 2
    assert llm.prompt(0) == llm.prompt(1)
    assert sorted(results) == [False, True]
    assert await f.summary_items() == 1
    summary = await f.store.get_summary(f.chat.chat_id)
    assert summary is not None and summary.version == 1
    assert summary.content == llm.replied[_winner(results)]  # the text of the compaction that wrote


async def test_two_concurrent_compactions_over_an_existing_summary_one_wins() -> None:
    # Given a chat with a summary (version 1) that is over the threshold again
    f = await setup()
    await f.chatter(4)
    assert await compact(f.store, ScriptedLlm(["base"]), MODEL, f.chat.chat_id, POLICY) is True
    await f.chatter(3, start=4)
    llm = ScriptedLlm(["next A", "next B"], gate_at=2)

    # When two compactions race from version 1
    results = await _race(f, llm)

    # Then one wins, the version moved by exactly one, and there is still a single SUMMARY item
    assert sorted(results) == [False, True]
    assert all(p.startswith("Previous summary:\nbase") for p in (llm.prompt(0), llm.prompt(1)))
    summary = await f.store.get_summary(f.chat.chat_id)
    assert summary is not None and summary.version == 2
    assert summary.content == llm.replied[_winner(results)]
    assert await f.summary_items() == 1
