"""Integration tests for the built-in http_get tool against a real loopback server."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from agent_core.config import Settings
from agent_core.tools.base import ToolContext, ToolFailure
from agent_core.tools.builtin.http_get import HttpGetArgs, HttpGetTool

BIG_BODY = b"x" * 10_000


class _Handler(BaseHTTPRequestHandler):
    """Test routes: /ok, /big, /go (to metadata), /hex (to 0x7f000001), /rel, /loop, /utf8, /zero (to port 0)."""

    def do_GET(self) -> None:
        """Answer the test routes."""
        port = self.server.server_address[1]
        redirects = {
            "/go": "http://169.254.169.254/latest/meta-data/",
            "/hex": f"http://0x7f000001:{port}/ok",
            "/rel": "/ok",
            "/loop": "/loop",
            "/ftp": "ftp://example.com/file",
            "/zero": "http://127.0.0.1:0/ok",
        }
        if self.path in redirects:
            self._send(302, b"", {"Location": redirects[self.path]})
        elif self.path == "/ok":
            self._send(200, b"hello from loopback", {"Content-Type": "text/plain; charset=utf-8"})
        elif self.path == "/big":
            self._send(200, BIG_BODY, {"Content-Type": "text/plain"})
        elif self.path == "/utf8":
            self._send(200, "你好，世界".encode() * 400, {"Content-Type": "text/plain; charset=utf-8"})
        else:
            self._send(404, b"not found", {"Content-Type": "text/plain"})

    def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        """Write a complete response."""
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output quiet."""


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """A loopback HTTP server on an ephemeral port; yields its base URL."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _ctx(allowed: str = "", max_output: int = 65536) -> ToolContext:
    """A tool context with the given allow list and output limit."""
    settings = Settings(
        AGENT_HTTP_ALLOWED_HOSTS=allowed,
        AGENT_TOOL_MAX_OUTPUT_BYTES=max_output,
        AGENT_TOOL_TIMEOUT_MS=5000,
    )
    return ToolContext(
        request_id="req-1",
        conversation_id="conv-1",
        user_id="user-1",
        settings=settings,
        timezone="UTC",
        now=datetime.now(UTC),
    )


async def _fetch(url: str, ctx: ToolContext) -> dict[str, Any]:
    """Run the tool on a URL."""
    result = await HttpGetTool().run(HttpGetArgs(url=url), ctx)
    assert isinstance(result, dict)
    return result


async def _failure(url: str, ctx: ToolContext) -> ToolFailure:
    """Run the tool expecting a ToolFailure and return it."""
    with pytest.raises(ToolFailure) as info:
        await _fetch(url, ctx)
    return info.value


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/",
        "http://localhost/",
        "http://2130706433/",
        "http://0x7f000001/",
        "http://0177.0.0.1/",
        "http://127.1/",
        "http://0x7f.1/",
        "http://[::1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://[::ffff:7f00:1]/",
        "http://10.0.0.1/",
        "http://172.16.0.1/",
        "http://192.168.1.1/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[fe80::1]/",
        "http://[fc00::1]/",
        "http://[fd00:ec2::254]/",
        "http://0.0.0.0/",
        "http://[::]/",
        "http://100.100.100.200/",
        "http://[64:ff9b::7f00:1]/",
        "https://127.0.0.1:8443/",
    ],
)
async def test_blocked_targets_are_denied(url: str) -> None:
    """Every spelling of an internal address is refused before any connection is made."""
    failure = await _failure(url, _ctx())
    assert (failure.status, failure.reason) == ("denied", "blocked_address")


@pytest.mark.parametrize(
    "url", ["ftp://example.com/", "file:///etc/passwd", "example.com", "http://", "http://a b/", "http://u:p@x/"]
)
async def test_invalid_urls(url: str) -> None:
    """Non-http(s) schemes and malformed URLs are invalid arguments."""
    failure = await _failure(url, _ctx())
    assert (failure.status, failure.reason) == ("error", "invalid_arguments")


@pytest.mark.parametrize("port", ["0", "00", "65536", "99999"])
async def test_a_port_outside_1_to_65535_is_refused(server: str, port: str) -> None:
    """`:0` is not "no port" (it would have meant port 80): refused before any connection, like 65536."""
    failure = await _failure(f"http://127.0.0.1:{port}/ok", _ctx("127.0.0.1"))
    assert (failure.status, failure.reason) == ("error", "invalid_arguments")
    assert "port" in failure.message.lower()


async def test_a_redirect_to_port_0_is_not_followed(server: str) -> None:
    """A hop to port 0 fails as a bad redirect, never as a request to port 80."""
    failure = await _failure(f"{server}/zero", _ctx("127.0.0.1"))
    assert (failure.status, failure.reason) == ("error", "fetch_failed")
    assert "bad redirect" in failure.message and "port" in failure.message


async def test_fetch_ok(server: str) -> None:
    """An allow-listed loopback page is fetched."""
    result = await _fetch(f"{server}/ok", _ctx("127.0.0.1"))
    assert result == {
        "url": f"{server}/ok",
        "status": 200,
        "contentType": "text/plain; charset=utf-8",
        "text": "hello from loopback",
        "truncated": False,
    }


async def test_not_found_is_a_result(server: str) -> None:
    """HTTP error statuses are returned, not raised."""
    result = await _fetch(f"{server}/missing", _ctx("127.0.0.1"))
    assert result["status"] == 404


async def test_relative_redirect_is_followed(server: str) -> None:
    """A redirect to an allowed address is followed and the final URL reported."""
    result = await _fetch(f"{server}/rel", _ctx("127.0.0.1"))
    assert (result["url"], result["status"], result["text"]) == (f"{server}/ok", 200, "hello from loopback")


async def test_redirect_to_metadata_is_denied(server: str) -> None:
    """A redirect to the cloud metadata address is refused."""
    failure = await _failure(f"{server}/go", _ctx("127.0.0.1"))
    assert (failure.status, failure.reason) == ("denied", "blocked_address")


async def test_redirect_to_other_spelling_is_denied(server: str) -> None:
    """The allow list matches the host string, so 0x7f000001 is still checked and refused."""
    failure = await _failure(f"{server}/hex", _ctx("127.0.0.1"))
    assert (failure.status, failure.reason) == ("denied", "blocked_address")


async def test_redirect_loop_fails(server: str) -> None:
    """More than five redirects is a fetch failure."""
    failure = await _failure(f"{server}/loop", _ctx("127.0.0.1"))
    assert (failure.status, failure.reason) == ("error", "fetch_failed")


async def test_redirect_to_other_scheme_fails(server: str) -> None:
    """A redirect off http(s) is not followed."""
    failure = await _failure(f"{server}/ftp", _ctx("127.0.0.1"))
    assert (failure.status, failure.reason) == ("error", "fetch_failed")


async def test_connection_refused_is_fetch_failed(server: str) -> None:
    """A closed port is reported as fetch_failed."""
    failure = await _failure("http://127.0.0.1:1/", _ctx("127.0.0.1"))
    assert (failure.status, failure.reason) == ("error", "fetch_failed")


async def test_large_body_is_truncated(server: str) -> None:
    """A body larger than the output budget is cut, with room left for the envelope."""
    result = await _fetch(f"{server}/big", _ctx("127.0.0.1", max_output=4096))
    assert result["truncated"] is True
    assert result["status"] == 200
    assert 0 < len(result["text"]) <= 4096 - 1024
    assert set(result["text"]) == {"x"}


async def test_multibyte_body_is_truncated_cleanly(server: str) -> None:
    """Truncating UTF-8 text never leaves a broken trailing character."""
    result = await _fetch(f"{server}/utf8", _ctx("127.0.0.1", max_output=4096))
    assert result["truncated"] is True
    assert "\ufffd" not in result["text"]
    assert result["text"].startswith("你好，世界")


@pytest.mark.parametrize(
    ("message", "url"),
    [
        ("fetch https://example.com/page?q=1", "https://example.com/page?q=1"),
        ("Please GET http://example.org.", "http://example.org"),
        ("can you open the page at https://example.com/a_(b) for me", "https://example.com/a_(b)"),
        ("open https://example.com/x)", "https://example.com/x"),
        ("抓取 https://example.com/新闻", "https://example.com/新闻"),
        ("获取http://example.com/api，谢谢", "http://example.com/api"),
        ("帮我打开 https://example.cn/index.html。", "https://example.cn/index.html"),
        ("访问一下这个网页：https://example.com", "https://example.com"),
    ],
)
def test_quick_match(message: str, url: str) -> None:
    """Fetch requests in English and Chinese are recognised and their URL extracted."""
    tool = HttpGetTool()
    assert tool.quick_match is not None
    match = tool.quick_match.search(message)
    assert match is not None
    assert tool.quick_args(message, match, "UTC") == {"url": url}


@pytest.mark.parametrize(
    "message", ["what time is it", "fetch me a coffee", "https://example.com", "forget https://example.com"]
)
def test_quick_match_ignores_other_messages(message: str) -> None:
    """Messages that do not ask to fetch a URL are left to the model."""
    tool = HttpGetTool()
    assert tool.quick_match is not None
    assert tool.quick_match.search(message) is None


def test_tool_declaration() -> None:
    """The tool declares its name, permission, kind and argument schema."""
    tool = HttpGetTool()
    schema = tool.schema()
    assert schema["function"]["name"] == "http_get"
    assert "url" in schema["function"]["parameters"]["properties"]
    assert tool.permissions == frozenset({"net:http"})
    assert tool.kind == "backend"
