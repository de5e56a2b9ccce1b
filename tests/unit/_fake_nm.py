"""A NodeManager's web service on loopback, as Hadoop 3.4.3 answers (tfyarn.client.nmweb)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse


class FakeNodeManager:
    """Containers' files (``files[container][name] = bytes``) and the apps held."""

    def __init__(self) -> None:
        self.files: dict[str, dict[str, bytes]] = {}
        self.apps: set[str] = set()
        self.address = ""
        self.requests: list[str] = []
        # A secure NodeManager without libhadoop.so lists files, cannot open them.
        self.cannot_open = False
        # Answer 503 to everything (seen from a real NodeManager as a task ended).
        self.unavailable = False

    def write(self, container: str, name: str, data: bytes) -> None:
        self.apps.add("application_" + "_".join(container.split("_")[1:3]))
        c = self.files.setdefault(container, {})
        c[name] = c.get(name, b"") + data

    def answer(self, path: str, query: dict[str, list[str]]) -> tuple[int, bytes]:
        self.requests.append(path)
        if self.unavailable:
            return 503, b"Service Unavailable"
        parts = path.strip("/").split("/")
        if parts[:4] == ["ws", "v1", "node", "apps"]:
            return (200, b"{}") if parts[4] in self.apps else (404, b"")
        if parts[:4] == ["ws", "v1", "node", "containers"] and parts[5:] == ["logs"]:
            files = self.files.get(parts[4])
            if files is None:
                return 404, b"java.lang.Exception: Unknown container."
            infos = [{"fileName": n, "fileSize": str(len(b))} for n, b in files.items()]
            doc = {"containerLogsInfo": {"containerLogInfo": infos}}
            return 200, json.dumps(doc).encode()
        if parts[:4] == ["ws", "v1", "node", "containerlogs"] and self.cannot_open:
            return 500, b"NoClassDefFoundError: org.apache.hadoop.io.SecureIOUtils"
        if parts[:4] == ["ws", "v1", "node", "containerlogs"]:
            data = self.files.get(parts[4], {}).get(parts[5])
            if data is None:
                return 404, b"java.lang.Exception: Unknown container."
            size = int(query.get("size", ["0"])[0]) or None
            tail = data if size is None else data[size:] if -size < len(data) else data
            head = (
                f"Container: {parts[4]} on {self.address}\n"
                "LogAggregationType: LOCAL\n"
                "====================\n"
                f"LogType:{parts[5]}\n"
                "LogLastModifiedTime:Sun Nov 22 22:27:35 +0000 2026\n"
                f"LogLength:{len(data)}\n"
                "LogContents:\n"
            ).encode()
            return 200, head + tail + f"End of LogType:{parts[5]}\n".encode()
        return 404, b""


@contextmanager
def serving(nm: FakeNodeManager) -> Iterator[str]:
    """Serve ``nm`` on loopback; yields its ``host:port``."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urlparse(self.path)
            code, body = nm.answer(url.path, parse_qs(url.query))
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    nm.address = f"127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield nm.address
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
