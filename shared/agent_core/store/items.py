"""Mapping between domain models and table items (keys and attribute names in one place)."""

from __future__ import annotations

import json
from typing import Any

from agent_core.domain.models import (
    Chat,
    DailySummary,
    Message,
    Profile,
    ProfileFact,
    Run,
    RunPointer,
    SessionSummary,
    Summary,
    ToolCall,
    TurnResult,
    Usage,
    Wait,
)
from agent_core.store.schema import GSI1, PK, SK
from agent_core.store.table import Item, Key

META = "META"
SUMMARY = "SUMMARY"
MSG_PREFIX = "MSG#"
MSG_END = "MSG#~"  # sorts after every message id and MSG#DAY# keys


def chat_pk(chat_id: str) -> str:
    return f"CHAT#{chat_id}"


def meta_key(chat_id: str) -> Key:
    return {PK: chat_pk(chat_id), SK: META}


def summary_key(chat_id: str) -> Key:
    return {PK: chat_pk(chat_id), SK: SUMMARY}


def run_key(chat_id: str, run_id: str) -> Key:
    return {PK: chat_pk(chat_id), SK: f"RUN#{run_id}"}


def request_key(chat_id: str, request_id: str) -> Key:
    return {PK: chat_pk(chat_id), SK: f"REQ#{request_id}"}


RUN_PREFIX = "RUN#"
RUN_END = "RUN#~"
POINTER_TTL_S = 7 * 24 * 3600


def run_pk(run_id: str) -> str:
    return f"RUN#{run_id}"


def pointer_key(run_id: str) -> Key:
    return {PK: run_pk(run_id), SK: META}


WAIT_PREFIX = "WAIT#"  # a run's WAIT items (frontend calls) share its partition


def wait_key(run_id: str, tool_id: str) -> Key:
    return {PK: run_pk(run_id), SK: f"{WAIT_PREFIX}{tool_id}"}


def pointer_to_item(pointer: RunPointer, expires_at: int) -> Item:
    return {
        **pointer_key(pointer.run_id),
        "chatId": pointer.chat_id,
        "userId": pointer.user_id,
        "expiresAt": expires_at,
    }


def pointer_from_item(item: Item) -> RunPointer:
    return RunPointer(run_id=item[PK].removeprefix("RUN#"), chat_id=item["chatId"], user_id=item["userId"])


def wait_to_item(wait: Wait) -> Item:
    item: Item = {
        **wait_key(wait.run_id, wait.tool_id),
        "userId": wait.user_id,
        "status": wait.status.value,
        "expiresAt": wait.expires_at,
    }
    if wait.params is not None:
        item["params"] = json.dumps(wait.params, ensure_ascii=False)
    return item


def wait_from_item(item: Item) -> Wait:
    return Wait(
        run_id=item[PK].removeprefix("RUN#"),
        tool_id=item[SK].removeprefix("WAIT#"),
        user_id=item["userId"],
        status=item["status"],
        params=json.loads(item["params"]) if item.get("params") else None,
        expires_at=item["expiresAt"],
    )


def message_sk(message_id: str) -> str:
    return f"{MSG_PREFIX}{message_id}"


def user_chats_pk(user_id: str) -> str:
    return f"USER#{user_id}"


def activity_sk(last_activity_at: int, chat_id: str) -> str:
    return f"{last_activity_at:015d}#{chat_id}"


def chat_to_item(chat: Chat) -> Item:
    return {
        **meta_key(chat.chat_id),
        "chatId": chat.chat_id,
        "userId": chat.user_id,
        "title": chat.title,
        "agentKey": chat.agent_key,
        "createdAt": chat.created_at,
        "lastActivityAt": chat.last_activity_at,
        "messageCount": chat.message_count,
        "version": chat.version,
        GSI1.pk: user_chats_pk(chat.user_id),
        GSI1.sk: activity_sk(chat.last_activity_at, chat.chat_id),
    }


def chat_from_item(item: Item) -> Chat:
    return Chat(
        chat_id=item["chatId"],
        user_id=item["userId"],
        title=item.get("title", ""),
        agent_key=item.get("agentKey", "main-agent"),
        created_at=item["createdAt"],
        last_activity_at=item["lastActivityAt"],
        message_count=item.get("messageCount", 0),
        active_run_id=item.get("activeRunId"),
        lease_expires_at=item.get("leaseExpiresAt"),
        version=item.get("version", 0),
        session_id=item.get("sessionId"),
        session_started_at=item.get("sessionStartedAt"),
    )


def message_to_item(message: Message) -> Item:
    item: Item = {
        PK: chat_pk(message.chat_id),
        SK: message_sk(message.id),
        "id": message.id,
        "role": message.role.value,
        "kind": message.kind.value,
        "content": message.content,
        "createdAt": message.created_at,
    }
    if message.tool_calls:
        item["toolCalls"] = json.dumps([c.model_dump() for c in message.tool_calls], ensure_ascii=False)
    optional = {
        "toolCallId": message.tool_call_id,
        "toolName": message.tool_name,
        "runId": message.run_id,
        "requestId": message.request_id,
    }
    item.update({k: v for k, v in optional.items() if v is not None})
    return item


def message_from_item(item: Item) -> Message:
    calls = json.loads(item["toolCalls"]) if item.get("toolCalls") else []
    return Message(
        id=item["id"],
        chat_id=item[PK].removeprefix("CHAT#"),
        role=item["role"],
        kind=item.get("kind", "NORMAL"),
        content=item.get("content", ""),
        tool_calls=[ToolCall(**c) for c in calls],
        tool_call_id=item.get("toolCallId"),
        tool_name=item.get("toolName"),
        run_id=item.get("runId"),
        request_id=item.get("requestId"),
        created_at=item["createdAt"],
    )


ANSWER_ID = "answerMessageId"


def run_to_item(run: Run, answer_id: str | None = None) -> Item:
    """The RUN item; with `answer_id` its stored result names the ASSISTANT message instead of copying it."""
    result = run.result
    if result is not None and answer_id is not None:
        result = result.model_copy(update={"assistant_message": ""})
    item: Item = {
        **run_key(run.chat_id, run.run_id),
        "runId": run.run_id,
        "userId": run.user_id,
        "requestId": run.request_id,
        "status": run.status.value,
        "agentKey": run.agent_key,
        "agentVersion": run.agent_version,
        "model": run.model,
        "usage": run.usage.model_dump_json(),
        "startedAt": run.started_at,
    }
    optional: dict[str, Any] = {
        "endedAt": run.ended_at,
        "firstTokenMs": run.first_token_ms,
        "errorCode": run.error_code,
        "errorMessage": run.error_message,
        "result": result.model_dump_json() if result else None,
        ANSWER_ID: answer_id if result is not None else None,
        "snapshot": json.dumps(run.snapshot, ensure_ascii=False) if run.snapshot is not None else None,
        "snapshotKey": run.snapshot_key,
        "answeredBy": run.answered_by,
        "cancelRequested": True if run.cancel_requested else None,
    }
    item.update({k: v for k, v in optional.items() if v is not None})
    return item


def run_from_item(item: Item) -> Run:
    return Run(
        run_id=item["runId"],
        chat_id=item[PK].removeprefix("CHAT#"),
        user_id=item["userId"],
        request_id=item["requestId"],
        status=item["status"],
        agent_key=item.get("agentKey", "main-agent"),
        agent_version=item.get("agentVersion", ""),
        model=item.get("model", ""),
        usage=Usage.model_validate_json(item["usage"]) if item.get("usage") else Usage(),
        started_at=item["startedAt"],
        ended_at=item.get("endedAt"),
        first_token_ms=item.get("firstTokenMs"),
        error_code=item.get("errorCode"),
        error_message=item.get("errorMessage"),
        result=TurnResult.model_validate_json(item["result"]) if item.get("result") else None,
        cancel_requested=bool(item.get("cancelRequested", False)),
        snapshot=json.loads(item["snapshot"]) if item.get("snapshot") else None,
        snapshot_key=item.get("snapshotKey"),
        answered_by=item.get("answeredBy"),
    )


def summary_to_item(summary: Summary) -> Item:
    return {
        **summary_key(summary.chat_id),
        "content": summary.content,
        "coversMessageId": summary.covers_message_id,
        "coveredCount": summary.covered_count,
        "updatedAt": summary.updated_at,
        "version": summary.version,
    }


def summary_from_item(item: Item) -> Summary:
    return Summary(
        chat_id=item[PK].removeprefix("CHAT#"),
        content=item["content"],
        covers_message_id=item["coversMessageId"],
        covered_count=item.get("coveredCount", 0),
        updated_at=item["updatedAt"],
        version=item.get("version", 1),
    )


def session_key(chat_id: str, session_id: str) -> Key:
    return {PK: chat_pk(chat_id), SK: f"SESSION#{session_id}"}


def session_to_item(session: SessionSummary) -> Item:
    return {
        **session_key(session.chat_id, session.session_id),
        "userId": session.user_id,
        "summary": session.summary,
        "keyTopics": json.dumps(session.key_topics, ensure_ascii=False),
        "messageCount": session.message_count,
        "localDate": session.local_date,
        "startedAt": session.started_at,
        "endedAt": session.ended_at,
        "skipped": session.skipped,
    }


def session_from_item(item: Item) -> SessionSummary:
    return SessionSummary(
        chat_id=item[PK].removeprefix("CHAT#"),
        session_id=item[SK].removeprefix("SESSION#"),
        user_id=item["userId"],
        summary=item.get("summary", ""),
        key_topics=json.loads(item.get("keyTopics") or "[]"),
        message_count=item.get("messageCount", 0),
        local_date=item["localDate"],
        started_at=item["startedAt"],
        ended_at=item["endedAt"],
        skipped=bool(item.get("skipped", False)),
    )


def user_pk(user_id: str) -> str:
    return f"USER#{user_id}"


def profile_key(user_id: str) -> Key:
    return {PK: user_pk(user_id), SK: "PROFILE"}


def profile_to_item(profile: Profile) -> Item:
    item: Item = {
        **profile_key(profile.user_id),
        "facts": json.dumps([f.model_dump() for f in profile.facts], ensure_ascii=False),
        "updatedAt": profile.updated_at,
    }
    if profile.timezone:
        item["timezone"] = profile.timezone
    return item


def profile_from_item(item: Item) -> Profile:
    return Profile(
        user_id=item[PK].removeprefix("USER#"),
        timezone=item.get("timezone"),
        facts=[ProfileFact(**f) for f in json.loads(item.get("facts") or "[]")],
        updated_at=item.get("updatedAt", 0),
    )


def day_key(user_id: str, date: str) -> Key:
    return {PK: user_pk(user_id), SK: f"DAY#{date}"}


def daily_to_item(day: DailySummary) -> Item:
    return {
        **day_key(day.user_id, day.date),
        "summary": day.summary,
        "keyTopics": json.dumps(day.key_topics, ensure_ascii=False),
        "sessionCount": day.session_count,
        "messageCount": day.message_count,
        "updatedAt": day.updated_at,
    }


def daily_from_item(item: Item) -> DailySummary:
    return DailySummary(
        user_id=item[PK].removeprefix("USER#"),
        date=item[SK].removeprefix("DAY#"),
        summary=item.get("summary", ""),
        key_topics=json.loads(item.get("keyTopics") or "[]"),
        session_count=item.get("sessionCount", 0),
        message_count=item.get("messageCount", 0),
        updated_at=item.get("updatedAt", 0),
    )


def daymark_key(user_id: str, date: str) -> Key:
    return {PK: user_pk(user_id), SK: f"DAYMARK#{date}"}
