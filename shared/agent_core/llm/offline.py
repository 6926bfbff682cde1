"""The offline model: deterministic, used when no endpoint is configured; every reply starts with [offline model]."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

from agent_core.domain.models import Usage
from agent_core.llm.base import LlmDelta, LlmRequest, ToolCallFragment
from agent_core.llm.tokens import estimate_messages, estimate_text

PREFIX = "[offline model]"
QuickMatcher = Callable[[str, set[str]], list[tuple[str, dict[str, Any]]]]
_SENTENCE = re.compile(r"(?<=[.!?。！？])\s*")
RECORD_CHARS = 1500  # each record block quoted in an answer, at most


def _chunks(text: str) -> list[str]:
    """Split into word-sized pieces so a reply streams as several deltas."""
    return re.findall(r"\S+\s*|\s+", text) or [text]


def _last_user_index(messages: list[dict[str, Any]]) -> int:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "user":
            return i
    return -1


def records(messages: list[dict[str, Any]]) -> list[str]:
    """What the prompt holds besides the instructions: every system message after the first.

    The prompt builders put the agent's instructions in the first system message and each record (the
    user's profile, the rolling summary, recalled days) in a system message of its own.
    """
    systems = [str(m.get("content") or "").strip() for m in messages if m.get("role") == "system"]
    return [text[:RECORD_CHARS] for text in systems[1:] if text]


# How the prompt strategies list tools: ReAct "- name: description ..." lines, intent "tools are needed (a, b)".
_LISTED_TOOL = re.compile(r"^- ([A-Za-z0-9_.-]+): ", re.MULTILINE)
_INTENT_TOOLS = re.compile(r"tools are needed \(([^)]*)\)")


def _original_question(messages: list[dict[str, Any]]) -> str:
    """The last user message that is not a ReAct observation or a retry request."""
    for message in reversed(messages):
        content = str(message.get("content") or "")
        if message.get("role") == "user" and not content.startswith(("Observation:", "Your answer could not")):
            return content
    return ""


def extractive_summary(text: str, limit: int = 1200) -> str:
    """First sentence of each line, de-duplicated, capped: a summary without a model."""
    seen: set[str] = set()
    picked: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.endswith(":"):
            continue
        first = _SENTENCE.split(line, maxsplit=1)[0][:200]
        if first not in seen:
            seen.add(first)
            picked.append(first)
    return "\n".join(picked)[:limit]


_WORD = re.compile(r"[A-Za-z][A-Za-z-]{4,}|[\u4e00-\u9fff]{2,4}")
_COMMON = frozenset({"about", "there", "which", "would", "could", "should", "their", "these", "those", "assistant"})


_CLAUSE = re.compile(r"[.!?;\n]+|,\s*(?:and|but)\s+|\s+(?:and|but)\s+(?=(?:i|my)\b)", re.I)
_FACT_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\bi(?:'m| am) allergic to (?P<value>[^,]+)", re.I), "constraints"),
    (re.compile(r"\bi (?:really |also )?(?:like|love|enjoy|adore) (?P<value>[^,]+)", re.I), "interests"),
    (re.compile(r"\bi (?:don't|do not|never) (?:like|eat|drink) (?P<value>[^,]+)", re.I), "preferences"),
    (re.compile(r"\bi (?:hate|dislike|can't stand) (?P<value>[^,]+)", re.I), "preferences"),
    (re.compile(r"\bmy (?P<key>[a-z][a-z ]{1,30}?) (?:is|are) (?P<value>[^,]+)", re.I), "preferences"),
)
_TAIL = re.compile(r"\s+(?:in|at|on|with|for|from|when|because|every)\s+")
_SPEAKER = re.compile(r"^(user|assistant|tool|system):\s*", re.I)
MAX_FACT_WORDS = 8


def _fact_value(value: str) -> str | None:
    words = value.strip().strip("\"'").split()
    return " ".join(words) if 0 < len(words) <= MAX_FACT_WORDS else None


def extract_facts(text: str) -> list[dict[str, str]]:
    """Profile facts stated by the user, extractively: "I like X", "my X is Y", "I'm allergic to X" (English
    patterns; lines labelled as another speaker's are skipped)."""
    facts: dict[tuple[str, str], dict[str, str]] = {}
    for line in text.splitlines():
        label = _SPEAKER.match(line.strip())
        if label and label.group(1).lower() != "user":
            continue
        for clause in _CLAUSE.split(_SPEAKER.sub("", line.strip())):
            for pattern, aspect in _FACT_PATTERNS:
                match = pattern.search(clause)
                value = _fact_value(match.group("value")) if match else None
                if match is None or value is None:
                    continue
                if aspect == "constraints":
                    key, value = f"allergy to {value.lower()}", f"allergic to {value}"
                elif "key" in pattern.groupindex:
                    key = match.group("key").strip().lower()
                    aspect = "budget" if key == "budget" else aspect
                else:
                    key = " ".join(_TAIL.split(value.lower())[0].split()[:3])
                    value = clause.strip()
                facts[(aspect, key)] = {"aspect": aspect, "key": key, "value": value}
                break
    return list(facts.values())


def key_topics(text: str, limit: int = 3) -> list[str]:
    """The most frequent longer words: topics without a model."""
    counts: dict[str, int] = {}
    for word in _WORD.findall(text.replace(PREFIX, "")):  # its own replies' marker is no topic
        lowered = word.lower()
        if lowered not in _COMMON and not lowered.startswith(("user", "messages", "previous")):
            counts[lowered] = counts.get(lowered, 0) + 1
    return [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]]


def _called_after(messages: list[dict[str, Any]], index: int) -> set[str]:
    """Names of the tools already called after message `index` (this turn's calls)."""
    return {
        str(call.get("function", {}).get("name"))
        for m in messages[index + 1 :]
        for call in m.get("tool_calls") or []
        if isinstance(call, dict)
    }


class OfflineLlm:
    """Calls the declared tools its matcher picks (once each per turn); else answers from the records in its prompt.

    It also answers the JSON decisions of the prompt strategies: intent analysis (`react` when a tool
    fits the question, else `direct`) and ReAct steps (one tool per step, then the final answer).
    """

    def __init__(self, quick_matcher: QuickMatcher | None = None) -> None:
        self._quick_matcher = quick_matcher

    async def stream(self, request: LlmRequest) -> AsyncIterator[LlmDelta]:
        if request.purpose == "summarize":
            async for delta in self._text(request, self._summary_answer(request)):
                yield delta
            return
        messages = request.messages
        last_user = _last_user_index(messages)
        question = str(messages[last_user].get("content") or "") if last_user >= 0 else ""
        if request.purpose == "enhance":  # nothing to polish without a model: the raw result as it is
            raw = str(messages[-1].get("content") or "").partition("Raw result:\n")[2]
            async for delta in self._text(request, raw or PREFIX):
                yield delta
            return
        if request.purpose in ("intent", "react"):
            async for delta in self._text(request, self._decision(request.purpose, messages)):
                yield delta
            return
        results = [m for m in messages[last_user + 1 :] if m.get("role") == "tool"]
        declared = {str(t.get("function", {}).get("name")) for t in request.tools}
        calls = self._quick_matcher(question, declared) if self._quick_matcher and declared else []
        called = _called_after(messages, last_user)
        calls = [(name, args) for name, args in calls if name not in called]
        if calls:
            async for delta in self._tool_calls(request, calls):
                yield delta
            return
        if results:
            lines = [f"{PREFIX} Tool results:"] + [str(m.get("content")) for m in results]
            async for delta in self._text(request, "\n".join(lines)):
                yield delta
            return
        async for delta in self._text(request, self._answer(question, records(messages[:last_user]))):
            yield delta

    def _listed_calls(self, question: str, messages: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
        """The calls it would make among the tools its prompt lists (as a model reads them)."""
        listed: set[str] = set()
        for message in messages:
            if message.get("role") == "system":
                content = str(message.get("content") or "")
                listed.update(_LISTED_TOOL.findall(content))
                for names in _INTENT_TOOLS.findall(content):
                    listed.update(n.strip() for n in names.split(","))
        if self._quick_matcher is None or not listed:
            return []
        return self._quick_matcher(question, listed)

    def _decision(self, purpose: str, messages: list[dict[str, Any]]) -> str:
        """The JSON an intent analysis or a ReAct step asks for."""
        question = _original_question(messages)
        calls = self._listed_calls(question, messages)
        if purpose == "intent":
            mode = "react" if calls else "direct"
            return json.dumps({"mode": mode, "reason": f"{PREFIX} {'a tool fits' if calls else 'no tool needed'}"})
        observations = [
            str(m.get("content"))[len("Observation:") :].strip()
            for m in messages
            if m.get("role") == "user" and str(m.get("content") or "").startswith("Observation:")
        ]
        if len(observations) < len(calls):
            name, args = calls[len(observations)]
            action_input: Any = {"tool_name": name, "parameters": args}
            return json.dumps({"thought": PREFIX, "action": "tool_call", "action_input": action_input})
        answer = "\n".join([f"{PREFIX} Tool results:", *observations]) if observations else f"{PREFIX} {question}"
        return json.dumps({"thought": PREFIX, "action": "final_answer", "action_input": answer}, ensure_ascii=False)

    @staticmethod
    def _answer(question: str, found: list[str]) -> str:
        """The question back, then the records the prompt carried, quoted: memory is visible without a model."""
        text = f"{PREFIX} You said: {question}"
        if found:
            text += "\nFrom the records I was given:\n" + "\n\n".join(found)
        return text

    @staticmethod
    def _summary_answer(request: LlmRequest) -> str:
        """Extractive; JSON when the instruction asks for it (summary + keyTopics, or profile facts)."""
        instruction = str(request.messages[0].get("content") or "")
        source = str(request.messages[-1].get("content") or "")
        summary = extractive_summary(source) or PREFIX
        if '"facts"' in instruction:
            return json.dumps({"facts": extract_facts(source)}, ensure_ascii=False)
        if "keyTopics" in instruction:
            return json.dumps({"summary": summary, "keyTopics": key_topics(source)}, ensure_ascii=False)
        return summary

    async def _text(self, request: LlmRequest, text: str) -> AsyncIterator[LlmDelta]:
        for piece in _chunks(text):
            yield LlmDelta(content=piece)
        yield LlmDelta(finish_reason="stop")
        yield LlmDelta(usage=self._usage(request, estimate_text(text)))

    async def _tool_calls(
        self, request: LlmRequest, calls: list[tuple[str, dict[str, Any]]]
    ) -> AsyncIterator[LlmDelta]:
        for index, (name, args) in enumerate(calls):
            text = json.dumps(args, ensure_ascii=False)
            half = len(text) // 2
            yield LlmDelta(tool_calls=[ToolCallFragment(index=index, id=f"call_offline_{index}", name=name)])
            yield LlmDelta(tool_calls=[ToolCallFragment(index=index, arguments=text[:half])])
            yield LlmDelta(tool_calls=[ToolCallFragment(index=index, arguments=text[half:])])
        yield LlmDelta(finish_reason="tool_calls")
        yield LlmDelta(usage=self._usage(request, 10 * len(calls)))

    @staticmethod
    def _usage(request: LlmRequest, completion: int) -> Usage:
        return Usage(prompt_tokens=estimate_messages(request.messages), completion_tokens=completion)
