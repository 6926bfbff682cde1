"""A test double speaking HTTP: a threaded server on a free loopback port, served from a daemon thread.

The plumbing the OpenAI and Bedrock stubs, the Lambda Runtime API and the AWS recording proxy share.
"""

from __future__ import annotations

import threading
from http.server import ThreadingHTTPServer
from types import TracebackType
from typing import Self

POLL_S = 0.005  # how often serve_forever looks for shutdown: stopping takes at most this long


class LoopbackServer(ThreadingHTTPServer):
    """One thread per request, none of which keeps the process alive."""

    daemon_threads = True


class Loopback:
    """Serves `server` (bound to 127.0.0.1, port 0) from a daemon thread between `start()` and `stop()`."""

    def __init__(self, server: ThreadingHTTPServer, name: str, poll_s: float = POLL_S) -> None:
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, args=(poll_s,), name=name, daemon=True)

    @property
    def origin(self) -> str:
        """`http://127.0.0.1:<port>`."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the listening socket."""
        if self._thread.ident is not None:  # shutdown() would wait forever for a loop that never started
            self._server.shutdown()
            self._thread.join(timeout=5)
        self._server.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
