"""`agent-core chat`: a terminal client of the public /api/ap/* endpoints (the local server or a deployed URL).

Answers stream as they are produced; each tool call is one line when it starts running and one when its
result arrives (status, duration); a frontend tool (`ask_user`, or any other an agent declares) is asked at
the keyboard and answered through POST /api/ap/submit while the run waits, and so is a call that needs approval
(`tool.approval`: `Approve tool(args)? [y/N]`, a reason on deny). Ctrl-C during a run cancels it.
A connection that drops mid-run is resumed by itself after the last event shown (`RunFollower`).
Commands: /new, /chats, /open ID, /agent [KEY], /help, /quit.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TextIO
from urllib.parse import urljoin

import httpx
from httpx_sse import EventSource

HELP = """Commands:
  /new          start a new chat
  /chats        list your chats
  /open ID      open a chat (its history is shown as it was streamed)
  /agent [KEY]  list the agents, or talk to KEY from now on
  /help         this text
  /quit         leave (also Ctrl-D)
Anything else is sent as a message. Ctrl-C during an answer cancels it."""

TERMINAL = {"run.complete", "run.error", "run.cancel"}


class ApiError(Exception):
    """A JSON error answer: `{"error": {"code", "message"}}` with its HTTP status."""

    def __init__(self, status: int, body: Any) -> None:
        error = body.get("error", {}) if isinstance(body, dict) else {}
        self.status = status
        self.code = str(error.get("code") or "error")
        super().__init__(f"{status} {self.code}: {error.get('message') or 'the server answered ' + str(status)}")


def retry_in(seconds: int, now: float | None = None) -> str:
    """When a refused turn may be sent again: `seconds` from now, as a span and the local clock time."""
    if seconds < 60:
        return f"try again in {seconds} s"
    at = time.strftime("%H:%M", time.localtime((time.time() if now is None else now) + seconds))
    minutes = -(-seconds // 60)
    span = f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"
    return f"try again in {span}, at {at}"


def _error(response: httpx.Response) -> ApiError:
    try:
        body = json.loads(response.read() or b"null")
    except ValueError:
        body = {"error": {"message": response.text[:200]}}
    return ApiError(response.status_code, body)


def _short(value: Any, limit: int = 120) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Api:
    """The endpoints the chat uses, with the caller's token (`Authorization: Bearer`)."""

    def __init__(self, url: str, token: str | None, timeout_s: float = 60.0) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        # No read timeout on the stream: a run may wait minutes for a frontend tool (pings keep it alive).
        self.base_url = url.rstrip("/")
        self.client = httpx.Client(base_url=self.base_url, headers=headers, timeout=httpx.Timeout(timeout_s))

    def close(self) -> None:
        self.client.close()

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.client.request(method, path, **kwargs)
        if response.status_code >= 400:
            raise _error(response)
        return response.json() if response.content else None

    def query(self, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """A run's events; a connection that drops mid-run is resumed (`RunFollower`)."""
        follower = RunFollower(self)
        yield from follower.follow(self._events("POST", "/api/ap/query", json=body))

    def run_events(self, run_id: str, after: int) -> Iterator[dict[str, Any]]:
        """A run's events after seq `after`, then its live ones (GET /api/ap/runs/{runId}/events)."""
        headers = {"Last-Event-ID": str(after)}
        return self._events("GET", f"/api/ap/runs/{run_id}/events", headers=headers)

    def _events(self, method: str, path: str, **kwargs: Any) -> Iterator[dict[str, Any]]:
        timeout = httpx.Timeout(self.client.timeout.connect, read=None)
        with self.client.stream(method, path, timeout=timeout, **kwargs) as response:
            if response.status_code >= 400:
                raise _error(response)
            for message in EventSource(response).iter_sse():  # `: ping` comments are not messages
                yield json.loads(message.data)


# Reconnects back off over about half a minute (a server that crashed and restarts is back by then; a run that
# waited on an answer goes on from its checkpoint), then the client gives up.
RESUME_BACKOFF_S = (0.2, 0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0)
RESUME_TRIES = len(RESUME_BACKOFF_S)  # reconnects in a row that bring nothing new before the client gives up


@dataclass
class RunFollower:
    """A run's events to its terminal one across dropped connections: when the stream breaks (or ends) before
    the terminal event, the run goes on on the server, and the client asks for the events after the last one
    it got (`Last-Event-ID`: its seq), so nothing is shown twice and nothing is missed."""

    api: Api
    sleep: Callable[[float], None] = time.sleep
    run_id: str = ""
    seq: int = 0
    resumed: int = 0  # reconnects made

    def follow(self, first: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        stream, failures = first, 0
        while True:
            before = self.seq
            try:
                for event in stream:
                    if event.get("type") == "stream.error":  # the server cannot continue this stream
                        raise ApiError(410, {"error": event})
                    seq = int(event.get("seq", 0))
                    if seq and seq <= self.seq:
                        continue  # already shown (never expected: the server starts after Last-Event-ID)
                    self.seq = seq or self.seq
                    self.run_id = str(event.get("runId") or self.run_id)
                    yield event
                    if event["type"] in TERMINAL:
                        return
                if not self.run_id:
                    return  # ended before the run had an id: nothing to resume
            except httpx.TransportError:
                if not self.run_id:
                    raise  # the run never started for this client: nothing to resume
            failures = 0 if self.seq > before else failures + 1
            if failures >= RESUME_TRIES:
                return
            if failures:
                self.sleep(RESUME_BACKOFF_S[min(failures, len(RESUME_BACKOFF_S)) - 1])
            self.resumed += 1
            stream = self.api.run_events(self.run_id, self.seq)


@dataclass
class Printer:
    """Draws events as lines of text: the same code for a live run and a replayed one."""

    out: TextIO
    ask: Callable[[str], str | None] | None = None  # None: replay (frontend tools are not asked again)
    submit: Callable[[str, str, dict[str, Any]], dict[str, Any]] | None = None
    decide: Callable[[str, str, bool, str], dict[str, Any]] | None = None  # an approval's answer
    run_id: str = ""
    tools: dict[str, dict[str, Any]] = field(default_factory=dict)
    mid_line: bool = False
    base_url: str = ""  # a file's link, relative to the API, is printed against it (a link to open)

    def write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()
        self.mid_line = not text.endswith("\n")

    def line(self, text: str) -> None:
        if self.mid_line:
            self.write("\n")
        self.write(text + "\n")

    def handle(self, event: dict[str, Any]) -> None:
        kind = event["type"]
        if kind == "request.query":
            self.run_id = event["runId"]
            if self.ask is None:  # replayed: show whose turn it was
                self.line(f"you> {event['message']}")
        elif kind == "reasoning.start":
            if self.mid_line:
                self.write("\n")
            self.write("(thinking) ")
        elif kind == "reasoning.snapshot":
            self.line("(thinking) " + event["text"])
        elif kind == "reasoning.delta":
            self.write(event["delta"])
        elif kind == "reasoning.end":
            self.line("")
        elif kind == "content.start":
            if self.mid_line:
                self.write("\n")
        elif kind == "content.delta":
            self.write(event["delta"])
        elif kind == "content.snapshot":
            self.line(event["text"])
        elif kind == "content.end":
            if self.mid_line:
                self.write("\n")
        elif kind == "tool.start":
            self.tools[event["toolId"]] = {"name": event["toolName"], "type": event["toolType"], "args": ""}
        elif kind == "tool.args":
            self.tools.setdefault(event["toolId"], {"name": "?", "type": "", "args": ""})["args"] += event["delta"]
        elif kind == "tool.snapshot":
            args = event.get("args")
            text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
            self.tools[event["toolId"]] = {"name": event["toolName"], "type": event["toolType"], "args": text}
            self._ended(event)
        elif kind == "tool.end":
            self._ended(event)
        elif kind == "tool.approval":
            self._approval(event)
        elif kind == "request.submit":
            self.line(f"  answered: {_short(event.get('params'))}")
        elif kind == "tool.result":
            tool = self.tools.get(event["toolId"], {"name": "?"})
            took = f" {event['timestamp'] - tool['ended']} ms" if "ended" in tool and "timestamp" in event else ""
            reason = f" ({event['reason']})" if event.get("reason") else ""
            mark = "✓" if event.get("status") == "ok" else "✗"
            self.line(f"  {mark} {tool['name']} {event.get('status')}{reason}{took} → {_short(event.get('result'))}")
            result = event.get("result")
            if isinstance(result, dict) and isinstance(result.get("url"), str):
                self.line(f"    file: {urljoin(self.base_url + '/', result['url'])}")
        elif kind in {"action.end", "action.snapshot"}:
            name = event.get("actionName", "")
            self.line(f"• ui action {name} {_short(event.get('args', ''))}".rstrip())
        elif kind == "run.warning":
            self.line(f"! warning {event['code']}: {event['message']}")
        elif kind == "run.complete":
            usage = event.get("usage")
            tokens = f", {usage['promptTokens']} + {usage['completionTokens']} tokens" if usage else ""
            self.line(f"[done: {event.get('finishReason')}{tokens}]")
        elif kind == "run.error" and event.get("retryAfter") is not None:  # a budget or rate limit refused it
            self.line(f"[refused {event['code']}: {event['message']}; {retry_in(int(event['retryAfter']))}]")
        elif kind == "run.error":
            self.line(f"[error {event['code']}: {event['message']}]")
        elif kind == "run.cancel":
            self.line("[cancelled]")

    def _ended(self, event: dict[str, Any]) -> None:
        tool = self.tools.get(event["toolId"])
        if tool is None:
            return
        tool["ended"] = event.get("timestamp", 0)
        self.line(f"⚙ {tool['name']} {_short(tool['args'] or '{}')} … {tool['type']}")
        if tool["type"] == "frontend" and self.ask is not None and event["type"] == "tool.end":
            self._answer(event["toolId"], tool)

    def _answer(self, tool_id: str, tool: dict[str, Any]) -> None:
        """Ask at the keyboard; submit what was typed (a choice's number picks it)."""
        assert self.ask is not None and self.submit is not None
        try:
            args = json.loads(tool["args"] or "{}")
        except ValueError:
            args = {}
        if tool["name"] == "ask_user" and isinstance(args, dict):
            self.line(f"? {args.get('question', 'The agent asks:')}")
            choices = [str(c) for c in args.get("choices") or []]
            for number, choice in enumerate(choices, 1):
                self.line(f"  {number}) {choice}")
            asked = self.ask("answer> ")
            if asked is None:
                return
            typed = asked.strip()
            if typed.isdigit() and 1 <= int(typed) <= len(choices):
                typed = choices[int(typed) - 1]
            params: dict[str, Any] = {"answer": typed}
        else:
            self.line(f"? {tool['name']} wants an answer (a JSON object; empty for {{}})")
            while True:
                asked = self.ask("json> ")
                if asked is None:
                    return
                typed = asked.strip() or "{}"
                try:
                    params = json.loads(typed)
                except ValueError as error:
                    self.line(f"  not JSON: {error}")
                    continue
                if isinstance(params, dict):
                    break
                self.line("  an object, please: {...}")
        answer = self.submit(self.run_id, tool_id, params)
        if not answer.get("accepted"):
            self.line(f"  (not taken: the run is {answer.get('status')})")

    def _approval(self, event: dict[str, Any]) -> None:
        """A call that needs approval: asked y/N at the keyboard (a reason on deny) and submitted; a replay
        shows the question (the call's result line says how it was answered)."""
        call = f"{event['toolName']}({_short(event.get('args'))})"
        self.line(f"? approval needed: {event.get('reason', '')}")
        if self.ask is None or self.decide is None:
            return
        typed = self.ask(f"Approve {call}? [y/N] ")
        if typed is None:
            return
        approve = typed.strip().lower() in {"y", "yes"}
        reason = ""
        if not approve:
            given = self.ask("reason (optional)> ")
            if given is None:
                return
            reason = given.strip()
        answer = self.decide(self.run_id, event["toolId"], approve, reason)
        if not answer.get("accepted"):
            self.line(f"  (not taken: {answer.get('status')})")
        else:
            self.line(f"  {'approved' if approve else 'denied'}")


class ChatSession:
    """The REPL's state: the open chat and the chosen agent."""

    def __init__(self, api: Api, out: TextIO, ask: Callable[[str], str], agent: str | None = None) -> None:
        self.api, self.out, self.ask = api, out, ask
        self.chat_id: str | None = None
        self.agent = agent
        self._asking = False

    def say(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def command(self, line: str) -> bool:
        """Run one line; False when the session should end."""
        name, _, arg = line.strip().partition(" ")
        arg = arg.strip()
        try:
            if name in {"/quit", "/exit"}:
                return False
            if name == "/help":
                self.say(HELP)
            elif name == "/new":
                self.chat_id = None
                self.say("(new chat)")
            elif name == "/chats":
                self.list_chats()
            elif name == "/open" and arg:
                self.open(arg)
            elif name == "/agent":
                self.pick_agent(arg)
            elif name.startswith("/"):
                self.say(f"unknown command {name}; /help lists them")
            elif line.strip():
                self.send(line.strip())
        except ApiError as error:
            if name == "/open" and error.code == "chat_not_found":  # `--chat` too: never a silent new chat
                where = f"staying in chat {self.chat_id}" if self.chat_id else "starting a new chat"
                self.say(f"chat {arg} not found; {where}")
            else:
                self.say(f"error {error}")
        except httpx.HTTPError as error:
            self.say(f"error: cannot reach the server: {error}")
        return True

    def list_chats(self) -> None:
        items = self.api.call("GET", "/api/ap/chats", params={"limit": 50})["items"]
        if not items:
            self.say("(no chats yet)")
        for chat in items:
            mark = "*" if chat["chatId"] == self.chat_id else " "
            self.say(f"{mark} {chat['chatId']}  {chat.get('updatedAt', '')}  {chat.get('chatName', '')}")

    def open(self, chat_id: str) -> None:
        printer = Printer(self.out, base_url=self.api.base_url)
        cursor: str | None = None
        while True:
            params = {"chatId": chat_id, **({"cursor": cursor} if cursor else {})}
            page = self.api.call("GET", "/api/ap/chat", params=params)
            for event in page["events"]:
                printer.handle(event)
            cursor = page.get("nextCursor")
            if not cursor:
                break
        self.chat_id = chat_id
        self.say(f"(chat {chat_id}: {page.get('chatName', '')})")

    def pick_agent(self, key: str) -> None:
        agents = self.api.call("GET", "/api/ap/agents")["items"]
        if not key:
            for agent in agents:
                mark = "*" if agent["key"] == self.agent else " "
                self.say(f"{mark} {agent['key']}  {agent.get('name', '')}: {agent.get('description', '')}")
            return
        if key not in {a["key"] for a in agents}:
            self.say(f"no agent {key!r}; /agent lists them")
            return
        self.agent = key
        self.say(f"(agent {key})")

    def send(self, message: str) -> None:
        body: dict[str, Any] = {"message": message}
        if self.chat_id:
            body["chatId"] = self.chat_id
        if self.agent:
            body["agentKey"] = self.agent
        printer = Printer(self.out, ask=self._ask, submit=self._submit, decide=self._decide, base_url=self.api.base_url)

        def interrupted(_signum: int, _frame: Any) -> None:
            # Ctrl-C during a run: ask the server to stop it and read on to its run.cancel
            if printer.run_id:
                printer.line("(cancelling)")
                threading.Thread(target=self._cancel, args=(printer.run_id,), daemon=True).start()
            if self._asking:
                raise KeyboardInterrupt

        main = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGINT, interrupted) if main else None
        terminal = False
        try:
            for event in self.api.query(body):
                if event["type"] == "request.query":
                    self.chat_id = event.get("chatId") or self.chat_id
                printer.handle(event)
                terminal = event["type"] in TERMINAL
        finally:
            if main:
                signal.signal(signal.SIGINT, previous)
        if not terminal:
            printer.line("[the connection closed before the run ended; /open the chat to see what was stored]")

    def _ask(self, prompt: str) -> str | None:
        """A frontend tool's answer from the keyboard; None when Ctrl-C cancelled the run instead."""
        self._asking = True
        try:
            return self.ask(prompt)
        except (KeyboardInterrupt, EOFError):
            return None
        finally:
            self._asking = False

    def _submit(self, run_id: str, tool_id: str, params: dict[str, Any]) -> dict[str, Any]:
        return dict(
            self.api.call("POST", "/api/ap/submit", json={"runId": run_id, "toolId": tool_id, "params": params})
        )

    def _decide(self, run_id: str, tool_id: str, approve: bool, reason: str) -> dict[str, Any]:
        body: dict[str, Any] = {"runId": run_id, "toolId": tool_id, "approve": approve}
        if reason:
            body["reason"] = reason
        return dict(self.api.call("POST", "/api/ap/submit", json=body))

    def _cancel(self, run_id: str) -> None:
        try:
            self.api.call("POST", "/api/ap/cancel", json={"runId": run_id})
        except (ApiError, httpx.HTTPError) as error:
            self.say(f"error: cancel failed: {error}")


def server_url(url: str) -> str:
    """`--url` as given, `http://` in front when it names no scheme (`localhost:8000`, as curl takes it)."""
    return url if "://" in url else f"http://{url}"


def run_chat(url: str, token: str | None, agent: str | None, chat_id: str | None, out: TextIO) -> int:
    """The interactive loop on stdin/stdout."""
    url = server_url(url)
    api = Api(url, token)
    session = ChatSession(api, out, input, agent)
    session.say(f"agent-core chat on {url} (/help for commands)")
    try:
        if chat_id:
            session.command(f"/open {chat_id}")
        while True:
            try:
                line = input("you> ")
            except (EOFError, KeyboardInterrupt):
                session.say("")
                return 0
            if not session.command(line):
                return 0
    finally:
        api.close()
