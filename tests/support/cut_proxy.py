"""A loopback TCP proxy that drops a streamed answer mid-way, as a network does (a phone changing network, a
proxy cutting a connection): the client sees its connection reset, the server goes on.

Every connection is forwarded byte for byte. A connection whose request starts with one of the `arm` request
lines (e.g. `POST /api/ap/query`) is cut once its response holds `marker`, `extra` bytes after the end of the
SSE message carrying it (so the client is left with part of the next message): the proxy sends the bytes up to
there, then closes both sides. Only the first `cuts` armed connections are cut; the rest (the reconnects) go
through. Cutting is decided on the bytes, never on time.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field

CHUNK = 65536


@dataclass
class CutProxy:
    target: tuple[str, int]
    arm: tuple[bytes, ...]
    marker: bytes
    extra: int = 20
    cuts: int = 1
    cut_count: int = 0
    requests: list[bytes] = field(default_factory=list)  # each request line seen, in order
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: socket.socket | None = None

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.getsockname()[1])

    def start(self) -> None:
        self._server = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._server.bind(("127.0.0.1", 0))
        self._server.listen(64)
        threading.Thread(target=self._accept, daemon=True).start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.close()

    def _accept(self) -> None:
        assert self._server is not None
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.target)
        except OSError:
            client.close()
            return
        for sock in (client, upstream):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        armed = threading.Event()
        threading.Thread(target=self._requests, args=(client, upstream, armed), daemon=True).start()
        self._responses(upstream, client, armed)

    def _requests(self, client: socket.socket, upstream: socket.socket, armed: threading.Event) -> None:
        """Client -> server; a request line in `arm` arms the connection (once, while cuts remain)."""
        try:
            while data := client.recv(CHUNK):
                for line in data.split(b"\r\n"):
                    if line.endswith(b" HTTP/1.1"):
                        self.requests.append(line)
                        with self._lock:
                            if any(line.startswith(a) for a in self.arm) and self.cut_count < self.cuts:
                                self.cut_count += 1
                                armed.set()
                upstream.sendall(data)
        except OSError:
            pass
        finally:
            _close(upstream)

    def _responses(self, upstream: socket.socket, client: socket.socket, armed: threading.Event) -> None:
        """Server -> client, cut once an armed connection's response holds the marker."""
        seen = b""
        try:
            while data := upstream.recv(CHUNK):
                if not armed.is_set():
                    client.sendall(data)
                    continue
                start = len(seen)
                seen += data
                at = seen.find(self.marker)
                end = seen.find(b"\n\n", at) if at >= 0 else -1
                if end < 0 or len(seen) < end + 2 + self.extra:
                    client.sendall(data)
                    continue
                client.sendall(seen[start : end + 2 + self.extra])
                client.shutdown(socket.SHUT_RDWR)  # the connection drops: the client's read fails
                return
        except OSError:
            pass
        finally:
            _close(client)
            _close(upstream)


def _close(sock: socket.socket) -> None:
    with suppress(OSError):
        sock.close()


@contextmanager
def cut_proxy(
    base_url: str, arm: tuple[bytes, ...], marker: bytes, *, extra: int = 20, cuts: int = 1
) -> Iterator[tuple[str, CutProxy]]:
    """The proxy's base URL in front of `base_url` (http://host:port)."""
    host, port = base_url.removeprefix("http://").rstrip("/").split(":")
    proxy = CutProxy((host, int(port)), arm, marker, extra=extra, cuts=cuts)
    proxy.start()
    try:
        yield f"http://127.0.0.1:{proxy.port}", proxy
    finally:
        proxy.stop()
