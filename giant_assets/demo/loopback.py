"""What the loopback servers of the demo and the tests share: serving on 127.0.0.1 from a thread."""

from __future__ import annotations

import threading
from http.server import ThreadingHTTPServer
from typing import Self


class LoopbackServer:
    """An HTTP server on 127.0.0.1 (port 0: any free port) served from a daemon thread; a context
    manager. ``base_url`` is what the Anthropic SDK takes, ``openai_base_url`` the OpenAI SDK's."""

    def _serve(self, httpd: ThreadingHTTPServer) -> None:
        self._httpd = httpd
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.base_url}/v1"

    def start(self) -> Self:
        if self._thread is None:
            self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join()
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
