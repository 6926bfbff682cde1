"""`agent-core chat` driven through a pseudo-terminal (stdlib pty: a real tty, so Ctrl-C is a SIGINT) against
`agent-core serve` with the offline model: tool lines, an ask_user prompt answered at the keyboard, cancel,
the chat commands and a replayed chat."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import sys
import threading
from collections.abc import Iterator

import pytest

from tests.support.cut_proxy import cut_proxy
from tests.support.local_server import local_server
from tests.support.openai_stub import OpenAiStub, StubScript

WAIT_S = float(
    os.environ.get("TTY_WAIT_S", "60")
)  # an upper bound for the client to catch up on a loaded machine, not a timing assertion


class Terminal:
    """A child process on a pseudo-terminal: type into it, wait for what it prints."""

    def __init__(self, argv: list[str]) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "OPENAI_", "AWS_"))}
        env["PYTHONIOENCODING"] = "utf-8"
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the pty is its controlling terminal
            os.execve(sys.executable, [sys.executable, *argv], env)
        self.seen = ""  # everything printed so far
        self.pos = 0  # where the next expect starts looking

    def type(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def expect(self, pattern: str, wait_s: float = WAIT_S) -> re.Match[str]:
        """Wait until `pattern` (a regex) appears after the last match; fail with the screen if it does not."""
        regex = re.compile(pattern)
        while True:
            found = regex.search(self.seen, self.pos)
            if found:
                self.pos = found.end()
                return found
            ready, _, _ = select.select([self.fd], [], [], wait_s)
            chunk = os.read(self.fd, 65536) if ready else b""
            if not chunk:
                raise AssertionError(f"{pattern!r} never appeared; the terminal showed:\n{self.seen[self.pos :]}")
            self.seen += chunk.decode(errors="replace").replace("\r\n", "\n")

    def wait(self) -> int:
        """The exit status once the child closed the terminal (killed if it does not within the bound)."""
        closed = False
        while not closed and select.select([self.fd], [], [], WAIT_S)[0]:
            try:
                closed = not os.read(self.fd, 65536)
            except OSError:  # EIO: the child's side is closed
                closed = True
        if not closed:  # a failed expect left it running: stop it
            os.kill(self.pid, signal.SIGKILL)
        _, status = os.waitpid(self.pid, 0)
        os.close(self.fd)
        return os.waitstatus_to_exitcode(status)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with local_server() as (base, _process):
        yield base


def test_terminal_chat_streams_tools_asks_cancels_and_replays(server: str) -> None:
    term = Terminal(["-m", "agent_core.cli", "chat", "--url", server, "--token", "tty-user"])
    try:
        term.expect(r"agent-core chat on ")
        term.expect(r"you> ")
        # Two tool calls, one line each when they run and one with status and duration when they finish
        term.type("what time is it in Tokyo and in London?\r")
        term.expect(r'⚙ time \{"timezone": "Asia/Tokyo"\} … backend')
        term.expect(r'⚙ time \{"timezone": "Europe/London"\} … backend')
        term.expect(r"✓ time ok \d+ ms → ")
        term.expect(r"✓ time ok \d+ ms → ")
        term.expect(r"\[offline model\] Tool results:")
        term.expect(r"\[done: stop, \d+ \+ \d+ tokens\]")
        term.expect(r"you> ")
        # ask_user at the keyboard: a choice by its number; the run goes on with the answer
        term.type('ask me to pick "tea" or "coffee"\r')
        term.expect(r"\? ask me to pick")
        term.expect(r"1\) tea")
        term.expect(r"2\) coffee")
        term.expect(r"answer> ")
        term.type("2\r")
        term.expect(r'answered: \{"answer": "coffee"\}')
        term.expect(r'✓ ask_user ok \d+ ms → \{"answer": "coffee"\}')
        term.expect(r'\{"answer": "coffee"\}')  # the model's answer quotes it
        term.expect(r"\[done: stop")
        term.expect(r"you> ")
        # The chat is listed (current, marked *); its id for /open below
        term.type("/chats\r")
        chat_id = term.expect(r"\* (c_\w+) .*what time is it in Tokyo").group(1)
        term.expect(r"you> ")
        # Agents: listed, an unknown one refused, a known one chosen
        term.type("/agent\r")
        term.expect(r"main-agent")
        term.expect(r"you> ")
        term.type("/agent no-such-agent\r")
        term.expect(r"no agent 'no-such-agent'")
        term.expect(r"you> ")
        term.type("/agent main-agent\r")
        term.expect(r"\(agent main-agent\)")
        term.expect(r"you> ")
        # A new chat; Ctrl-C at a frontend tool's prompt cancels the run
        term.type("/new\r")
        term.expect(r"\(new chat\)")
        term.expect(r"you> ")
        term.type("ask me anything\r")
        term.expect(r"answer> ")
        # As a person would: Ctrl-C again if the first one was not seen (on a loaded machine the signal can
        # reach the process before its prompt reads the keyboard, and a signal delivered then is lost to it).
        for attempt in range(5):
            term.type("\x03")
            try:
                term.expect(r"\(cancelling\)", wait_s=WAIT_S / 6)
                break
            except AssertionError:
                if attempt == 4:
                    raise
        term.expect(r"\[cancelled\]")
        term.expect(r"you> ")
        # /open replays the first chat: the same lines as live
        term.type(f"/open {chat_id}\r")
        term.expect(r"you> what time is it in Tokyo and in London\?")
        term.expect(r"✓ time ok \d+ ms")
        term.expect(r"you> ask me to pick")
        term.expect(r'answered: \{"answer": "coffee"\}')
        term.expect(rf"\(chat {chat_id}: ")
        term.expect(r"you> ")
        # A chat the server does not know is one readable line, and the session goes on in the open chat
        term.type("/open c_nosuchchat\r")
        term.expect(rf"chat c_nosuchchat not found; staying in chat {chat_id}\n")
        term.expect(r"you> ")
        term.type("/quit\r")
    finally:
        status = term.wait()
    assert status == 0


def test_terminal_chat_with_an_unknown_chat_says_so_and_starts_a_new_one(server: str) -> None:
    """`agent-core chat --chat <unknown id>` once printed a 404 and went on in a new chat without saying so."""
    term = Terminal(["-m", "agent_core.cli", "chat", "--url", server, "--token", "tty-unknown", "--chat", "c_gone"])
    try:
        term.expect(r"agent-core chat on ")
        term.expect(r"chat c_gone not found; starting a new chat\n")
        term.expect(r"you> ")
        term.type("hello\r")
        term.expect(r"\[offline model\] You said: hello")
        term.expect(r"you> ")
        term.type("/chats\r")  # the new chat, current (marked *), not c_gone
        term.expect(r"\* (c_\w+) .*hello")
        term.expect(r"you> ")
        term.type("/quit\r")
    finally:
        status = term.wait()
    assert status == 0
    assert "c_gone" not in term.seen[term.seen.index("starting a new chat") :]
    assert "error 404" not in term.seen


def test_terminal_chat_prints_a_budget_refusal_with_when_to_try_again() -> None:
    # A daily token budget of 1: the first turn spends it, the next is refused until the user's midnight
    with local_server(AGENT_USAGE_DAILY_TOKEN_BUDGET="1") as (base, _):
        term = Terminal(["-m", "agent_core.cli", "chat", "--url", base, "--token", "tty-thrifty"])
        try:
            term.expect(r"you> ")
            term.type("hello\r")
            term.expect(r"\[done: stop")
            term.expect(r"you> ")
            term.type("and again\r")
            term.expect(
                r"\[refused budget_exceeded: today's usage budget is spent; it renews at midnight; "
                r"try again in (\d+ h )?\d+ min, at \d\d:\d\d\]\n"
            )
            term.expect(r"you> ")
            term.type("/quit\r")
        finally:
            status = term.wait()
    assert status == 0
    assert "[error budget_exceeded" not in term.seen


def test_terminal_chat_takes_a_url_without_its_scheme_and_prints_whole_file_links(server: str) -> None:
    # `--url localhost:8000` (as the README's curl lines write it) once failed every line with
    # "unsupported protocol 'localhost://'"; it means http://
    bare = server.removeprefix("http://")
    term = Terminal(["-m", "agent_core.cli", "chat", "--url", bare, "--token", "tty-bare"])
    try:
        term.expect(f"agent-core chat on {re.escape(server)} ")
        term.expect(r"you> ")
        term.type("hello\r")
        term.expect(r"\[offline model\] You said: hello")
        term.expect(r"you> ")
        # A saved file's link is printed whole, to open as it is (it was the API's relative path)
        term.type("save this as notes.txt: meet at 3pm\r")
        term.expect(f"    file: {re.escape(server)}/api/ap/data\\?file=c_[a-z0-9]+/notes\\.txt&t=")
        term.expect(r"you> ")
        term.type("/quit\r")
    finally:
        status = term.wait()
    assert status == 0


def test_terminal_chat_prints_each_piece_as_it_arrives() -> None:
    # The stub sends chunk n only once the terminal has shown chunk n-1: no buffering anywhere on the way.
    releases = [threading.Event() for _ in range(8)]
    script = StubScript.text("Hello", " from", " the stub.", reasoning=["Thinking", " it over"])
    script.before_chunk = lambda n: releases[n].wait(timeout=60)
    with OpenAiStub() as stub, local_server(OPENAI_BASE_URL=stub.base_url, OPENAI_API_KEY="sk-local") as (base, _):
        stub.enqueue(script)
        term = Terminal(["-m", "agent_core.cli", "chat", "--url", base, "--token", "tty-streamer"])
        try:
            term.expect(r"you> ")
            term.type("say hello\r")
            term.expect(r"\(thinking\) Thinking")
            releases[1].set()
            term.expect(r" it over")
            for n, piece in [(2, "Hello"), (3, " from"), (4, r" the stub\.")]:
                releases[n].set()
                term.expect(piece)
            for release in releases:
                release.set()
            term.expect(r"\n\[done: stop, 11 \+ 7 tokens\]")
            term.expect(r"you> ")
            term.type("\x04")  # Ctrl-D leaves
        finally:
            for release in releases:
                release.set()
            status = term.wait()
    assert status == 0


def test_terminal_chat_asks_for_approval_and_submits_yes_and_no() -> None:
    # The deployment's rule: every `time` call waits for approval (the offline model calls it for Tokyo and London)
    with local_server(AGENT_TOOL_APPROVAL='{"time": "always"}') as (base, _):
        term = Terminal(["-m", "agent_core.cli", "chat", "--url", base, "--token", "tty-approver"])
        try:
            term.expect(r"you> ")
            term.type("what time is it in Tokyo and in London?\r")
            term.expect(r"\? approval needed: time always needs approval")
            term.expect(r'Approve time\(\{"timezone": "Asia/Tokyo"\}\)\? \[y/N\] ')
            term.type("y\r")
            term.expect(r"  approved\n")
            term.expect(r'Approve time\(\{"timezone": "Europe/London"\}\)\? \[y/N\] ')
            term.type("n\r")
            term.expect(r"reason \(optional\)> ")
            term.type("not London\r")
            term.expect(r"  denied\n")
            term.expect(r"\[done: stop")
            term.expect(r"you> ")
            term.type("/quit\r")
        finally:
            status = term.wait()
    assert status == 0
    # The approved call ran once; the denied one did not, and the model read the person's reason (the two
    # results arrive in whichever order the calls end)
    assert len(re.findall(r"✓ time ok \d+ ms → .*Asia/Tokyo", term.seen)) == 1
    assert re.search(r"✗ time denied \(approval_denied\) \d+ ms → .*not London", term.seen)
    assert "Europe/London" not in term.seen.split("✓ time ok")[1].split("\n")[0]


def test_terminal_chat_resumes_by_itself_after_the_connection_drops() -> None:
    # A proxy between the terminal and the server drops the answer's connection after "Hello" (and part of the
    # next message); the run goes on on the server and the chat continues from the last event it printed
    # (GET /api/ap/runs/{runId}/events, Last-Event-ID): the answer shows whole, each piece once.
    releases = [threading.Event() for _ in range(6)]
    script = StubScript.text("Hello", " from", " the stub.", " Bye.")
    script.before_chunk = lambda n: releases[n].wait(timeout=60)
    with (
        OpenAiStub() as stub,
        local_server(OPENAI_BASE_URL=stub.base_url, OPENAI_API_KEY="sk-local") as (base, _),
        cut_proxy(base, arm=(b"POST /api/ap/query ",), marker=b'"delta":"Hello"') as (url, proxy),
    ):
        stub.enqueue(script)
        term = Terminal(["-m", "agent_core.cli", "chat", "--url", url, "--token", "tty-resumer"])
        try:
            term.expect(r"you> ")
            term.type("say hello\r")
            term.expect(r"Hello")
            releases[1].set()  # " from" follows "Hello": the proxy cuts the connection inside its message
            term.expect(r" from")
            for release in releases:
                release.set()
            term.expect(r" the stub\. Bye\.\n\[done: stop, 11 \+ 7 tokens\]")
            term.expect(r"you> ")
            term.type("\x04")
        finally:
            for release in releases:
                release.set()
            status = term.wait()
    assert status == 0
    assert proxy.cut_count == 1
    resumes = [line for line in proxy.requests if line.startswith(b"GET /api/ap/runs/")]
    assert len(resumes) == 1, proxy.requests
    answer = term.seen[term.seen.index("say hello") :]
    assert answer.count("Hello from the stub. Bye.") == 1
    assert answer.count("Hello") == 1 and answer.count("from") == 1
    assert "connection closed" not in answer
