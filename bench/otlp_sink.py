"""A stand-in OTLP/HTTP trace collector for `TRACING=1 bench/overhead`: accepts every
`POST /v1/traces`, reads the body, answers 200 with an empty ExportTraceServiceResponse and
counts requests and bytes (printed to stderr at exit). It decodes nothing: the cost under
test is the agents' (recording spans, encoding and sending them), not a collector's.

    python bench/otlp_sink.py PORT
"""

from __future__ import annotations

import signal
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

received = {"requests": 0, "bytes": 0}


class Sink(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the exporter's session reuses its connection

    def do_POST(self) -> None:  # the name http.server calls
        size = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(size)
        received["requests"] += 1
        received["bytes"] += size
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Sink)

    def stop(*_: object) -> None:
        print(
            f"otlp sink: {received['requests']} exports, {received['bytes']} bytes",
            file=sys.stderr,
        )
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        stop()


if __name__ == "__main__":
    main()
