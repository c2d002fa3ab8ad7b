"""moto's server with DynamoDB requests applied one at a time.

moto (5.2.5) checks a conditional write's condition and applies the write
without holding a lock, so two concurrent conditional writes to one item can
both succeed (measured: eight racers, two winners in about 1 of 150 races).
DynamoDB itself serialises the writes to an item. This front gives the
emulator that property: every DynamoDB request (X-Amz-Target
"DynamoDB_20120810.*") runs under one process-wide lock, response body
included. Connections are still accepted and parsed concurrently, and any
other service moto serves (SQS in the moto-only fallback stack, whose long
polls must not hold the lock) is passed through untouched.

Usage: python moto_dynamodb.py HOST PORT
Run by scripts/stack.sh with the venv built from tools/requirements.txt
(served by waitress), and by docker-compose.yml in the moto image (served by
werkzeug, which that image has).
"""

import os
import signal
import sys
import threading

try:
    import waitress
except ImportError:  # the moto Docker image has no waitress
    waitress = None

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    create_backend_app,
)


class SerialDynamoDB:
    """WSGI middleware: DynamoDB requests run strictly one after another."""

    def __init__(self, app):
        self.app = app
        self.lock = threading.Lock()
        # Exposed for the health check: how many DynamoDB requests were
        # applied under the lock.
        self.applied = 0

    def __call__(self, environ, start_response):
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        if not target.startswith("DynamoDB_"):
            return self.app(environ, start_response)
        seen = []

        def capture(status, headers, exc_info=None):
            seen[:] = [status, headers, exc_info]
            return lambda chunk: None  # moto never uses the write callable

        with self.lock:
            body = self.app(environ, capture)
            try:
                # Consume the whole body inside the lock: moto may build the
                # response lazily, and the write is only done when it is.
                data = b"".join(body)
            finally:
                close = getattr(body, "close", None)
                if close is not None:
                    close()
            self.applied += 1
        status, headers, exc_info = seen
        # moto leaves Content-Length off its error responses; the server then
        # frames them by closing the connection, which HTTP clients that
        # reuse connections misread now and then. A buffered body has a
        # known length: say it, so every response is framed the same way.
        headers = [(k, v) for k, v in headers if k.lower() != "content-length"]
        headers.append(("Content-Length", str(len(data))))
        start_response(status, headers, exc_info)
        return [data]


def main(argv):
    if len(argv) != 3:
        sys.exit("usage: moto_dynamodb.py HOST PORT")
    host, port = argv[1], int(argv[2])
    # waitress's loop swallows a SystemExit raised in a handler, so SIGTERM
    # ends the process directly (moto keeps its state in memory only).
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    app = DomainDispatcherApplication(create_backend_app)
    # waitress rather than werkzeug's development server, which closes the
    # connection after every response; HTTP clients that pool connections
    # then now and then read a response from a socket already torn down
    # ("use of closed network connection" under load). waitress keeps
    # HTTP/1.1 connections alive and frames every response.
    if waitress is None:
        from werkzeug.serving import run_simple

        run_simple(host, port, SerialDynamoDB(app), threaded=True)
        return
    waitress.serve(
        SerialDynamoDB(app),
        host=host,
        port=port,
        threads=16,
        connection_limit=1000,
        channel_timeout=120,
        ident="moto",
        _quiet=True,
    )


if __name__ == "__main__":
    main(sys.argv)
