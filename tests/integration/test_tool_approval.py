"""Human approval of tool calls on the native wire: the pause, the submit, denial, timeout, cancel, audit."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import pytest

from agent_core.api import routes
from agent_core.api.app import build_app
from agent_core.api.routes.submit import answer_approval, answer_params
from agent_core.context import build_context
from agent_core.domain.models import Wait, WaitKind, WaitStatus
from agent_core.errors import Conflict
from agent_core.store.memory_table import MemoryTable
from agent_core.store.table import Table
from agent_core.store.wait_table import WaitTable
from agent_core.wires.approval_answers import approval_request_id, decide
from agent_core.wires.input import ApprovalAnswer
from tests.support.approvals import BIG_NOTES, approval_context, decision, live_run, run_writer
from tests.support.fake_llm import Reply, ScriptedLlm
from tests.support.fixtures import make_settings
from tests.support.server import serve
from tests.support.sse import sse_events


def _writes(*calls: tuple[str, dict[str, Any]]) -> ScriptedLlm:
    return ScriptedLlm(Reply(tool_calls=[(cid, "write_note", args) for cid, args in calls]), Reply(text="done"))


def _tool_message(llm: ScriptedLlm, call_id: str) -> dict[str, Any]:
    return next(m for m in llm.requests[-1].messages if m.get("tool_call_id") == call_id)


async def test_an_approved_call_runs_only_after_its_approval(any_table: Table) -> None:
    # Given an agent whose write_note always needs approval
    llm = _writes(("c1", {"path": "a.txt", "content": "hi"}))
    audit: list[dict[str, Any]] = []
    context, tool = approval_context(llm, any_table, audit)
    store = context.deps
    seen: dict[str, Any] = {}

    async def person(event: dict[str, Any]) -> None:
        if event["type"] == "tool.approval":
            # Then nothing ran before the approval, and its WAIT item exists before the event is sent
            seen["ran_before"] = list(tool.executions)
            wait = await store.waits.get_wait(event["runId"], event["toolId"])
            seen["wait"] = wait
            seen["answer"] = await answer_approval(store, event["runId"], event["toolId"], decision(True))
            seen["again"] = await answer_approval(store, event["runId"], event["toolId"], decision(False))

    # When the person approves on tool.approval
    events = await run_writer(context, "write a note", person)

    kinds = [e["type"] for e in events]
    assert kinds.index("tool.end") + 1 == kinds.index("tool.approval") < kinds.index("tool.result")
    approval = next(e for e in events if e["type"] == "tool.approval")
    assert approval["toolName"] == "write_note" and approval["args"] == {"path": "a.txt", "content": "hi"}
    assert approval["reason"] == "write_note always needs approval"
    assert seen["ran_before"] == [] and seen["wait"].kind == WaitKind.APPROVAL
    assert seen["answer"] == {"accepted": True, "status": "accepted"}
    assert seen["again"] == {"accepted": False, "status": "already_decided", "approved": True}
    # Then the tool ran once, and the audit line says who approved it and when
    assert tool.executions == ["c1"]
    result = next(e for e in events if e["type"] == "tool.result")
    assert result["status"] == "ok" and result["result"] == {"written": "a.txt", "bytes": 2}
    line = next(a for a in audit if a["toolCallId"] == "c1")
    assert line["status"] == "ok" and line["approval"]["decision"] == "approved" and line["approval"]["by"] == "u"
    assert line["approval"]["at"] > 0
    assert events[-1]["type"] == "run.complete"


async def test_a_denied_call_never_runs_and_the_model_is_told_why() -> None:
    llm = _writes(("c1", {"path": "a.txt"}))
    audit: list[dict[str, Any]] = []
    context, tool = approval_context(llm, MemoryTable(), audit)

    async def person(event: dict[str, Any]) -> None:
        if event["type"] == "tool.approval":
            reason = "not that file"
            await answer_approval(context.deps, event["runId"], event["toolId"], decision(False, reason=reason))

    events = await run_writer(context, "write a note", person)

    assert tool.executions == []
    result = next(e for e in events if e["type"] == "tool.result")
    assert (result["status"], result["reason"]) == ("denied", "approval_denied")
    told = json.loads(_tool_message(llm, "c1")["content"])["error"]
    assert told["status"] == "denied" and "denied" in told["message"] and "not that file" in told["message"]
    line = next(a for a in audit if a["toolCallId"] == "c1")
    assert line["approval"] == {
        "decision": "denied",
        "asked": "write_note always needs approval",
        "by": "u",
        "at": line["approval"]["at"],
        "reason": "not that file",
    }


async def test_no_answer_in_time_is_a_timeout_the_model_is_told_and_a_late_answer_is_expired() -> None:
    llm = _writes(("c1", {"path": "a.txt"}))
    audit: list[dict[str, Any]] = []
    context, tool = approval_context(llm, MemoryTable(), audit, AGENT_TOOL_APPROVAL_TIMEOUT_MS="1000")
    ids: dict[str, str] = {}

    async def note(event: dict[str, Any]) -> None:
        if event["type"] == "tool.approval":
            ids.update(run=event["runId"], tool=event["toolId"])

    events = await run_writer(context, "write a note", note)

    assert tool.executions == []
    result = next(e for e in events if e["type"] == "tool.result")
    assert (result["status"], result["reason"]) == ("timeout", "approval_timeout")
    told = json.loads(_tool_message(llm, "c1")["content"])["error"]
    assert told["status"] == "timeout" and "1000 ms" in told["message"]
    assert next(a for a in audit if a["toolCallId"] == "c1")["approval"]["decision"] == "timeout"
    wait = await context.deps.waits.get_wait(ids["run"], ids["tool"])
    assert wait is not None and wait.status == WaitStatus.EXPIRED
    late = await answer_approval(context.deps, ids["run"], ids["tool"], decision(True))
    assert late == {"accepted": False, "status": "expired"}
    assert tool.executions == []


async def test_a_cancel_while_waiting_ends_the_wait_and_the_call_never_runs() -> None:
    llm = _writes(("c1", {"path": "a.txt"}))
    audit: list[dict[str, Any]] = []
    context, tool = approval_context(llm, MemoryTable(), audit)
    store = context.deps
    ids: dict[str, str] = {}

    async def cancel(event: dict[str, Any]) -> None:
        if "chatId" in event:
            ids["chat"] = event["chatId"]
        if event["type"] == "tool.approval":
            ids.update(run=event["runId"], tool=event["toolId"])
            assert await store.turns.request_cancel(ids["chat"], event["runId"])

    events = await run_writer(context, "write a note", cancel)

    assert events[-1]["type"] == "run.cancel" and tool.executions == []
    wait = await store.waits.get_wait(ids["run"], ids["tool"])
    assert wait is not None and wait.status == WaitStatus.CANCELLED
    late = await answer_approval(store, ids["run"], ids["tool"], decision(True))
    assert late == {"accepted": False, "status": "cancelled"}
    assert next(a for a in audit if a["toolCallId"] == "c1")["approval"]["decision"] == "cancelled"
    assert tool.executions == []


async def test_only_calls_the_rule_matches_wait_and_calls_governance_refuses_ask_nobody() -> None:
    # Given write_note gated on content over 100 bytes: one small call, one big, one with invalid arguments
    llm = _writes(("small", {"path": "a", "content": "x"}), ("big", {"path": "b", "content": "y" * 101}), ("bad", {}))
    context, tool = approval_context(llm, MemoryTable(), approval=BIG_NOTES)

    async def person(event: dict[str, Any]) -> None:
        if event["type"] == "tool.approval":
            await answer_approval(context.deps, event["runId"], event["toolId"], decision(True))

    events = await run_writer(context, "write notes", person)

    asked = [e for e in events if e["type"] == "tool.approval"]
    assert [(e["toolId"], e["reason"]) for e in asked] == [("big", "notes over 100 bytes")]
    assert sorted(tool.executions) == ["big", "small"]
    results = {e["toolId"]: e for e in events if e["type"] == "tool.result"}
    assert results["bad"]["reason"] == "invalid_arguments"


async def test_the_deployments_rule_holds_for_every_agent() -> None:
    # Given AGENT_TOOL_APPROVAL gating write_note while the agent's own policy is never
    llm = _writes(("c1", {"path": "a"}))
    context, tool = approval_context(
        llm, MemoryTable(), approval="never", AGENT_TOOL_APPROVAL='{"write_note": "always"}'
    )

    async def person(event: dict[str, Any]) -> None:
        if event["type"] == "tool.approval":
            await answer_approval(context.deps, event["runId"], event["toolId"], decision(False))

    events = await run_writer(context, "write", person)
    assert [e["toolId"] for e in events if e["type"] == "tool.approval"] == ["c1"] and tool.executions == []


async def test_answers_of_the_wrong_kind_are_422_and_another_users_answer_is_unmatched() -> None:
    llm = _writes(("c1", {"path": "a"}))
    context, tool = approval_context(llm, MemoryTable())
    store = context.deps
    seen: dict[str, Any] = {}

    async def person(event: dict[str, Any]) -> None:
        if event["type"] == "tool.approval":
            from agent_core.errors import InvalidRequest

            with pytest.raises(InvalidRequest) as wrong:
                await answer_params(store, event["runId"], event["toolId"], "u", {"x": 1})
            seen["code"] = wrong.value.code
            seen["bob"] = await answer_approval(store, event["runId"], event["toolId"], decision(True, user="bob"))
            seen["mine"] = await answer_approval(store, event["runId"], event["toolId"], decision(True))

    await run_writer(context, "write", person)
    assert seen == {
        "code": "approval_expected",
        "bob": {"accepted": False, "status": "unmatched"},
        "mine": {"accepted": True, "status": "accepted"},
    }
    assert tool.executions == ["c1"]


def test_the_submit_route_takes_an_approval_and_refuses_the_wrong_answer_kind() -> None:
    # Given the local server with the offline model, the time tool always gated (a quick rule calls it)
    context = build_context(
        make_settings(AGENT_TOOL_APPROVAL='{"time": "always"}'), table=MemoryTable(), audit=lambda line: None
    )
    answers: list[httpx.Response] = []
    with (
        serve(build_app(*routes.local, context=context)) as base,
        httpx.Client(base_url=base, headers={"X-User-Id": "alice"}, timeout=30) as client,
    ):
        with client.stream("POST", "/api/ap/query", json={"message": "what time is it in Tokyo?"}) as response:
            events = []
            for event in sse_events(response):
                events.append(event)
                if event["type"] == "tool.approval":
                    body = {"runId": event["runId"], "toolId": event["toolId"]}
                    answers.append(client.post("/api/ap/submit", json={**body, "params": {"a": 1}}))
                    answers.append(client.post("/api/ap/submit", json={**body, "approve": True, "params": {}}))
                    answers.append(client.post("/api/ap/submit", json={**body, "reason": "why"}))
                    answers.append(client.post("/api/ap/submit", json={**body, "approve": True, "reason": "ok"}))
        # A frontend tool's wait refuses an approval
        with client.stream("POST", "/api/ap/query", json={"message": "ask me something"}) as response:
            for event in sse_events(response):
                if event["type"] == "tool.end":
                    body = {"runId": event["runId"], "toolId": event["toolId"], "approve": True}
                    answers.append(client.post("/api/ap/submit", json=body))
                    answers.append(client.post("/api/ap/submit", json={**body, "approve": None, "params": {"a": 1}}))
    refused = [(a.status_code, a.json()["error"]["code"]) for a in answers[:3]]
    assert refused == [(422, "approval_expected"), (422, "invalid_request"), (422, "invalid_request")]
    assert answers[3].json() == {"accepted": True, "status": "accepted"}
    result = next(e for e in events if e["type"] == "tool.result")
    assert result["status"] == "ok" and result["result"]["timezone"] == "Asia/Tokyo"
    assert (answers[4].status_code, answers[4].json()["error"]["code"]) == (422, "params_expected")
    assert answers[5].json() == {"accepted": True, "status": "accepted"}


async def test_a_replay_keeps_the_approval_event(any_table: Table) -> None:
    llm = _writes(("c1", {"path": "a"}))
    context, _ = approval_context(llm, any_table)

    async def person(event: dict[str, Any]) -> None:
        if event["type"] == "tool.approval":
            await answer_approval(context.deps, event["runId"], event["toolId"], decision(True))

    events = await run_writer(context, "write", person)
    run = await context.deps.turns.get_run(events[0]["chatId"], events[0]["runId"])
    assert run is not None and run.snapshot is not None
    live = next(e for e in events if e["type"] == "tool.approval")
    assert live in [e for e in run.snapshot if e["type"] == "tool.approval"]


async def test_two_calls_wait_in_parallel_and_each_answer_decides_its_own() -> None:
    llm = _writes(("c1", {"path": "a"}), ("c2", {"path": "b"}))
    context, tool = approval_context(llm, MemoryTable())
    asked: list[dict[str, Any]] = []

    async def person(event: dict[str, Any]) -> None:
        if event["type"] == "tool.approval":
            asked.append(event)
        if len(asked) == 2 and event["type"] == "tool.approval":
            store = context.deps
            await asyncio.gather(
                answer_approval(store, asked[1]["runId"], "c2", decision(True)),
                answer_approval(store, asked[0]["runId"], "c1", decision(False)),
            )

    events = await run_writer(context, "write two", person)
    results = {e["toolId"]: e["status"] for e in events if e["type"] == "tool.result"}
    assert results == {"c1": "denied", "c2": "ok"} and tool.executions == ["c2"]


async def test_an_answer_to_a_run_whose_process_stopped_is_refused_and_decides_nothing(any_table: Table) -> None:
    # Given a run waiting for an approval whose process died: its chat's lease ran out (no heartbeat renews it)
    from agent_core.domain.ids import now_ms

    context, _ = approval_context(ScriptedLlm(), any_table)
    waits = context.deps.waits
    await live_run(any_table, "r_dead", "c_dead", "u")
    await waits.create_wait(
        Wait(run_id="r_dead", tool_id="c1", user_id="u", expires_at=int(time.time()) + 600, kind=WaitKind.APPROVAL)
    )
    assert await context.deps.turns.renew_lease("c_dead", "r_dead", now_ms() - 1)
    # When the person approves, Then the answer is refused (no run would act on it) and the call still waits
    assert await answer_approval(context.deps, "r_dead", "c1", decision(True)) == {
        "accepted": False,
        "status": "interrupted",
    }
    wait = await waits.get_wait("r_dead", "c1")
    assert wait is not None and wait.status == WaitStatus.WAITING
    # And another user's answer learns nothing of the run
    assert (await answer_approval(context.deps, "r_dead", "c1", decision(True, user="bob")))["status"] == "unmatched"


async def test_an_answer_to_a_run_that_ended_is_refused_with_its_status(any_table: Table) -> None:
    # Given an approval item that outlives its run (a call handed over to the client's next request): the run
    # completed and released its lease
    from agent_core.domain.models import RunStatus
    from agent_core.store import items as it

    context, _ = approval_context(ScriptedLlm(), any_table)
    run = await live_run(any_table, "r_done", "c_done", "u")
    await context.deps.waits.create_wait(
        Wait(run_id="r_done", tool_id="c1", user_id="u", expires_at=int(time.time()) + 600, kind=WaitKind.APPROVAL)
    )
    assert await context.deps.turns.release_lease("c_done", "r_done")
    await any_table.put(it.run_to_item(run.model_copy(update={"status": RunStatus.COMPLETED})))
    # When it is answered at /api/ap/submit, Then nothing is decided there (the next request still can)
    got = await answer_approval(context.deps, "r_done", "c1", decision(True))
    assert got == {"accepted": False, "status": "completed"}
    wait = await context.deps.waits.get_wait("r_done", "c1")
    assert wait is not None and wait.status == WaitStatus.WAITING


async def test_an_answer_that_beats_the_runs_timeout_is_honoured(any_table: Table) -> None:
    # Given an approval whose time runs out, and an answer that lands just before the run expires the wait
    from agent_core.runtime.approvals import RunWaits

    context, _ = approval_context(ScriptedLlm(), any_table)
    store = context.deps

    class AnswerFirst:
        """The run's store, where an approval lands between the run's last read and its expire."""

        def __getattr__(self, name: str) -> Any:
            return getattr(store.waits, name)

        async def expire_wait(self, run_id: str, tool_id: str) -> bool:
            assert await answer_approval(store, run_id, tool_id, decision(True, reason="just in time")) == {
                "accepted": True,
                "status": "accepted",
            }
            return await store.waits.expire_wait(run_id, tool_id)

    await live_run(any_table, "r1", "c1", "u")
    waits = RunWaits(AnswerFirst(), "r1", "u")  # type: ignore[arg-type]
    await waits.open_approval("c1", "write_note", {}, "asked", 60_000)
    # When the run's time runs out
    outcome = await waits.await_decision("c1", 1)
    # Then the answer that won the race decides (the submit was told it was accepted)
    assert (outcome.decision, outcome.by, outcome.reason) == ("approved", "u", "just in time")
    wait = await store.waits.get_wait("r1", "c1")
    assert wait is not None and wait.status == WaitStatus.SUBMITTED


def test_the_stateless_chain_stream_refuses_an_agent_with_gated_tools_before_any_work() -> None:
    # Given the deployment's rules gating the main agent's time tool
    llm = ScriptedLlm()
    context = build_context(
        make_settings(AGENT_TOOL_APPROVAL='{"time": "always"}'), table=MemoryTable(), llm=llm, audit=lambda _: None
    )
    with (
        serve(build_app(*routes.local, context=context)) as base,
        httpx.Client(base_url=base, headers={"X-User-Id": "alice"}, timeout=30) as client,
    ):
        answer = client.post("/api/chat/stream", json={"messages": [{"role": "user", "content": "time?"}]})
    # Then nothing stored could take the answer: 422 naming the wires that can ask, and the model never called
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert (error["code"], error["param"]) == ("approval_unsupported", "agentName")
    assert "time" in error["message"] and "/api/ap/query" in error["message"]
    assert llm.requests == []


async def test_a_decision_is_taken_back_only_by_the_request_that_made_it(any_table: Table) -> None:
    # Given a waiting approval, decided by one request (its person, time and answer)
    waits = WaitTable(any_table)
    asked = Wait(run_id="r1", tool_id="t1", user_id="u", kind=WaitKind.APPROVAL, expires_at=int(time.time()) + 600)
    await waits.create_wait(asked.model_copy(update={"tool_name": "write_note", "args": {"a": 1}, "reason": "why"}))
    mine = decision(True, reason="ok")
    assert await waits.decide_wait("r1", "t1", mine)
    # When another decision (another time, another answer) is taken back, nothing changes
    other_time = mine.model_copy(update={"at_ms": mine.at_ms + 1})
    other_answer = mine.model_copy(update={"approved": False})
    assert not await waits.undecide_wait("r1", "t1", other_time)
    assert not await waits.undecide_wait("r1", "t1", other_answer)
    decided = await waits.get_wait("r1", "t1")
    assert decided is not None and decided.status == WaitStatus.SUBMITTED and decided.approved is True
    # When the request that decided it takes it back (its turn never opened), it waits again, as it was asked
    assert await waits.undecide_wait("r1", "t1", mine)
    again = await waits.get_wait("r1", "t1")
    assert again is not None and again.status == WaitStatus.WAITING
    assert (again.approved, again.decided_by, again.decided_at, again.decision_reason) == (None, "", 0, "")
    assert (again.tool_name, again.args, again.reason) == ("write_note", {"a": 1}, "why")
    # And it is decided once more, once; taking back twice does nothing
    assert not await waits.undecide_wait("r1", "t1", mine)
    assert await waits.decide_wait("r1", "t1", decision(False))
    assert not await waits.decide_wait("r1", "t1", decision(True))


async def test_a_request_refused_for_one_approval_takes_back_the_others_it_decided(any_table: Table) -> None:
    # Given two approvals a request answers, the second already decided elsewhere (POST /api/ap/submit)
    waits = WaitTable(any_table)
    found = []
    for tool_id in ("t1", "t2"):
        wait = Wait(run_id="r1", tool_id=tool_id, user_id="u", kind=WaitKind.APPROVAL, expires_at=int(time.time()) + 60)
        await waits.create_wait(wait)
        found.append((ApprovalAnswer(approval_request_id("r1", tool_id), True), wait))
    assert await waits.decide_wait("r1", "t2", decision(False))
    # When the request decides them: 409 for the second
    with pytest.raises(Conflict) as refused:
        await decide(waits, "u", found)
    assert refused.value.code == "approval_already_decided"
    # Then the first, decided by this refused request, waits again; the second keeps its decision
    first, second = await waits.get_wait("r1", "t1"), await waits.get_wait("r1", "t2")
    assert first is not None and first.status == WaitStatus.WAITING and first.approved is None
    assert second is not None and second.status == WaitStatus.SUBMITTED and second.approved is False
