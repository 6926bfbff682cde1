"""Built-in ``http_get``: fetch a public web page with SSRF-safe, address-pinned connections."""

from __future__ import annotations

import asyncio
import codecs
import http.client
import json
import re
import socket
import ssl
import time
from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import urljoin, urlsplit

from pydantic import BaseModel, Field

from agent_core.tools.base import Tool, ToolContext, ToolFailure
from agent_core.tools.netguard import IPAddress, resolve_checked

MAX_REDIRECTS = 5
MIN_PORT, MAX_PORT = 1, 65535
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
OUTPUT_HEADROOM_BYTES = 1024
USER_AGENT = "agent-core-http-get/1.0"
_CHUNK = 65536
_URL_CHARS = r"[^\s<>\"'`，。；！？、）】」』]+"
_QUICK_PATTERN = (
    # a request, not a report: "I read https://... yesterday" is not asking to fetch it
    r"(?:(?<!\bi )(?<!\bwe )(?<!\bthey )(?<!\bhe )(?<!\bshe )"
    r"\b(?:fetch|get|open|download|retrieve|visit|load|read|grab|browse)\b"
    r"(?:\s+(?:the|this|that|page|web\s*page|url|link|website|site|contents?|of|at|from))*\s+"
    r"|(?:抓取|获取|打开|访问|读取|下载|请求|爬取)(?:一下|下)?\s*(?:这个|该)?\s*"
    r"(?:网页|页面|网址|链接|网站|地址)?(?:的内容)?\s*[:：]?\s*)"
    rf"<?(?P<url>https?://{_URL_CHARS})"
)
_TRAILING_PUNCT = ".,;:!?'\">]}"


class HttpGetArgs(BaseModel):
    """Arguments of ``http_get``."""

    url: str = Field(..., description="Absolute http:// or https:// URL of the page to fetch.")


@dataclass(frozen=True)
class _Target:
    """One validated request target: scheme, host, port, Host header value and request path."""

    url: str
    scheme: str
    host: str
    port: int
    host_header: str
    path: str


@dataclass
class FetchedPage:
    """A fetched response: final URL, status, content type, body bytes and whether it was cut."""

    url: str
    status: int
    content_type: str
    charset: str | None
    body: bytes
    truncated: bool


def _bad(message: str) -> ToolFailure:
    """An invalid-arguments failure."""
    return ToolFailure("error", "invalid_arguments", message)


def _parse_target(url: str) -> _Target:
    """Validate an http(s) URL and split it into what the connection needs."""
    if not url or any(ord(c) <= 0x20 or ord(c) == 0x7F for c in url):
        raise _bad("url must be non-empty and contain no whitespace or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
        host = parts.hostname or ""
    except ValueError as exc:  # includes a port beyond 65535 or not a number
        raise _bad(f"invalid url: {exc}") from exc
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise _bad("only http and https URLs are supported")
    if not host:
        raise _bad("url has no host")
    if parts.username is not None or parts.password is not None:
        raise _bad("credentials in the url are not supported")
    try:
        host = host.encode("idna").decode("ascii") if not host.isascii() else host
    except UnicodeError as exc:
        raise _bad(f"invalid host name: {exc}") from exc
    default_port = 443 if scheme == "https" else 80
    port = default_port if port is None else port
    if not MIN_PORT <= port <= MAX_PORT:  # `:0` would otherwise read as "no port" (the default one)
        raise _bad(f"url port must be between {MIN_PORT} and {MAX_PORT}, not {port}")
    bare = host.split("%", 1)[0]
    shown = f"[{bare}]" if ":" in bare else bare
    host_header = shown if port == default_port else f"{shown}:{port}"
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return _Target(url, scheme, host, port, host_header, path)


def _open_socket(addresses: list[IPAddress], port: int, timeout: float) -> socket.socket:
    """Connect to the first reachable checked address (never re-resolving the host name)."""
    error: OSError | None = None
    for ip in addresses:
        try:
            return socket.create_connection((str(ip), port), timeout=timeout)
        except OSError as exc:
            error = exc
    raise error or OSError("no address to connect to")


class _PinnedHTTPConnection(http.client.HTTPConnection):
    """HTTP connection that connects to pre-checked IP addresses instead of resolving the host."""

    def __init__(self, host: str, port: int, addresses: list[IPAddress], timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._addresses = addresses
        self.raw_sock: socket.socket | None = None

    def connect(self) -> None:
        """Open the socket to a checked address."""
        self.sock = self.raw_sock = _open_socket(self._addresses, self.port, self.timeout or 10.0)


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    """HTTPS connection to pre-checked IPs, with SNI and certificate checks for the original host."""

    def __init__(self, host: str, port: int, addresses: list[IPAddress], timeout: float) -> None:
        self._ssl_context = ssl.create_default_context()
        super().__init__(host, port, timeout=timeout, context=self._ssl_context)
        self._addresses = addresses
        self.raw_sock: socket.socket | None = None

    def connect(self) -> None:
        """Open the socket to a checked address and wrap it in TLS for the original host name."""
        sock = _open_socket(self._addresses, self.port, self.timeout or 10.0)
        try:
            self.sock = self.raw_sock = self._ssl_context.wrap_socket(sock, server_hostname=self.host)
        except BaseException:
            sock.close()
            raise


def _remaining(deadline: float) -> float:
    """Seconds left before the deadline; a timeout failure once it has passed."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise ToolFailure("error", "fetch_failed", "timed out")
    return left


def _read_body(
    conn: _PinnedHTTPConnection | _PinnedHTTPSConnection,
    resp: http.client.HTTPResponse,
    limit: int,
    deadline: float,
) -> tuple[bytes, bool]:
    """Read at most ``limit`` body bytes; report whether more were available."""
    chunks: list[bytes] = []
    total = 0
    while total <= limit:
        if conn.raw_sock is not None:
            conn.raw_sock.settimeout(_remaining(deadline))
        chunk = resp.read1(min(_CHUNK, limit + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    data = b"".join(chunks)
    return data[:limit], total > limit


def _fetch_once(
    target: _Target, addresses: list[IPAddress], limit: int, deadline: float
) -> tuple[FetchedPage, str | None]:
    """One GET to a checked address; returns the page and the redirect location, if any."""
    cls = _PinnedHTTPSConnection if target.scheme == "https" else _PinnedHTTPConnection
    conn = cls(target.host, target.port, addresses, _remaining(deadline))
    try:
        headers = {
            "Host": target.host_header,
            "User-Agent": USER_AGENT,
            "Accept": "text/html,application/xhtml+xml,application/json,text/plain;q=0.9,*/*;q=0.8",
            "Accept-Encoding": "identity",
            "Connection": "close",
        }
        conn.request("GET", target.path, headers=headers)
        resp = conn.getresponse()
        location = resp.getheader("Location") if resp.status in REDIRECT_STATUSES else None
        body, truncated = (b"", False) if location else _read_body(conn, resp, limit, deadline)
        page = FetchedPage(
            url=target.url,
            status=resp.status,
            content_type=resp.getheader("Content-Type", "") or "",
            charset=resp.headers.get_content_charset(),
            body=body,
            truncated=truncated,
        )
        resp.close()
        return page, location
    finally:
        conn.close()


def fetch(url: str, allowed_hosts: list[str], limit: int, timeout_s: float) -> FetchedPage:
    """Blocking GET following up to MAX_REDIRECTS redirects, checking the address of every hop."""
    deadline = time.monotonic() + timeout_s
    target = _parse_target(url)
    for hop in range(MAX_REDIRECTS + 1):
        addresses = resolve_checked(target.host, target.port, allowed_hosts)
        try:
            page, location = _fetch_once(target, addresses, limit, deadline)
        except (OSError, http.client.HTTPException, ValueError, UnicodeError) as exc:
            raise ToolFailure("error", "fetch_failed", f"{type(exc).__name__}: {exc}") from exc
        if location is None:
            return page
        if hop == MAX_REDIRECTS:
            break
        try:
            target = _parse_target(urljoin(target.url, location))
        except ToolFailure as exc:
            raise ToolFailure("error", "fetch_failed", f"bad redirect: {exc.message}") from exc
    raise ToolFailure("error", "fetch_failed", f"too many redirects (more than {MAX_REDIRECTS})")


def _decode(body: bytes, charset: str | None, complete: bool) -> str:
    """Decode body text with its declared charset (UTF-8 by default), replacing bad bytes."""
    for encoding in (charset, "utf-8"):
        if not encoding:
            continue
        try:
            decoder = codecs.getincrementaldecoder(encoding)(errors="replace")
            return str(decoder.decode(body, final=complete))
        except (LookupError, TypeError, ValueError):
            continue
    return body.decode("utf-8", errors="replace")


def _fit(result: dict[str, Any], budget: int) -> dict[str, Any]:
    """Cut ``result['text']`` to the longest prefix whose JSON-encoded result fits in ``budget`` bytes."""

    def size(length: int) -> int:
        return len(json.dumps({**result, "text": text[:length], "truncated": True}, ensure_ascii=False).encode("utf-8"))

    text: str = result["text"]
    if len(json.dumps(result, ensure_ascii=False).encode("utf-8")) <= budget:
        return result
    low, high = 0, len(text)
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if size(mid) <= budget else (low, mid - 1)
    return {**result, "text": text[:low], "truncated": True}


def _strip_url(url: str) -> str:
    """Drop sentence punctuation (and an unbalanced closing parenthesis) trailing a URL."""
    while url and (url[-1] in _TRAILING_PUNCT or (url[-1] == ")" and url.count("(") < url.count(")"))):
        url = url[:-1]
    return url


class HttpGetTool(Tool):
    """GET a public http(s) URL and return its status, content type and (truncated) text."""

    name: ClassVar[str] = "http_get"
    description: ClassVar[str] = (
        "Fetch a public web page or API over HTTP(S) with GET and return its final URL, status code, "
        "content type and body text (truncated if large). Private, loopback and cloud-metadata "
        "addresses are refused."
    )
    args_model: ClassVar[type[BaseModel]] = HttpGetArgs
    permissions: ClassVar[frozenset[str]] = frozenset({"net:http"})
    kind = "backend"
    quick_match: ClassVar[re.Pattern[str] | None] = re.compile(_QUICK_PATTERN, re.IGNORECASE)

    def quick_args(self, message: str, match: re.Match[str], ctx_timezone: str) -> dict[str, Any]:
        """The URL the message asks to fetch."""
        return {"url": _strip_url(match.group("url"))}

    async def run(self, args: Any, ctx: ToolContext) -> Any:
        """Fetch the URL in a worker thread and shape the page as a JSON-serialisable dict."""
        parsed = args if isinstance(args, HttpGetArgs) else HttpGetArgs.model_validate(args.model_dump())
        url = parsed.url.strip()
        _parse_target(url)
        settings = ctx.settings
        max_out = settings.tool_max_output_bytes
        limit = max(max_out - OUTPUT_HEADROOM_BYTES, 0)
        timeout_s = max(settings.tool_timeout_ms, 1) / 1000
        page = await asyncio.to_thread(fetch, url, list(settings.http_allowed_hosts), limit, timeout_s)
        result = {
            "url": page.url,
            "status": page.status,
            "contentType": page.content_type,
            "text": _decode(page.body, page.charset, complete=not page.truncated),
            "truncated": page.truncated,
        }
        return _fit(result, limit)
