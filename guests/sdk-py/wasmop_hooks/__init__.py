"""Metacontroller's Python hooks, called in-process: the adapter that
``wasmop metacontroller build`` puts around the hook files of a
controller's hooks folder. It exports the WIT ``wasmop:metacontroller/hooks``
(``wit/metacontroller@0.1.0/hooks.wit``); the host does the rest of what
Metacontroller does (the request, the update strategies, the writes).

A hook file is a Python hook as Metacontroller's examples write one: an
``http.server.BaseHTTPRequestHandler`` whose ``do_POST`` reads the JSON body
and writes the JSON answer, served by ``HTTPServer(...).serve_forever()`` at
the end of the file. :func:`load` runs the file once, at build time (a file
that does not load is refused there), with ``http.server``'s servers
replaced by one that keeps the handler class and serves nothing. Each call
then gives the handler, through the standard library's own request parsing
and response writing, the request Metacontroller's POST would carry (over a
connection object that holds the bytes instead of a socket) and reads the
answer back with ``http.client``'s parser: a 200 with its body is the
hook's answer; another status, an exception or no answer at all is the
hook's failure, in its own words.

This package imports nothing of the operator WIT (``wasmop_sdk`` does), so
a hook guest's world is only ``hook-guest``.
"""

from __future__ import annotations

import http.client
import http.server
import importlib.util
import io
import socketserver
import sys
import traceback
from typing import Any, Dict, Type

from componentize_py_types import Err

__all__ = ["export_hooks", "load", "call"]


class _Captured(Exception):
    """Stops a hook file's ``serve_forever`` without serving."""


class _Server:
    """Stands in for ``HTTPServer``, ``ThreadingHTTPServer`` and
    ``socketserver.TCPServer`` while a hook file runs: it keeps the handler
    class and serves nothing."""

    handler: "Type[http.server.BaseHTTPRequestHandler] | None" = None

    def __init__(self, address: Any, handler: Any, *args: Any, **kwargs: Any) -> None:
        type(self).handler = handler
        self.server_address = address

    def serve_forever(self, *args: Any, **kwargs: Any) -> None:
        return None

    def __enter__(self) -> "_Server":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def server_close(self) -> None:
        return None


def load(name: str, path: str) -> "Type[http.server.BaseHTTPRequestHandler]":
    """Runs the hook file ``path`` as the module ``name`` and returns the
    request handler class it serves."""
    saved = (http.server.HTTPServer, http.server.ThreadingHTTPServer, socketserver.TCPServer)
    _Server.handler = None
    http.server.HTTPServer = _Server  # type: ignore[misc, assignment]
    http.server.ThreadingHTTPServer = _Server  # type: ignore[misc, assignment]
    socketserver.TCPServer = _Server  # type: ignore[misc, assignment]
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"{path} is not a Python file")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    finally:
        http.server.HTTPServer, http.server.ThreadingHTTPServer, socketserver.TCPServer = saved
    handler = _Server.handler
    if handler is None:
        raise ImportError(f"{path} starts no HTTPServer: no request handler to call")
    return handler


class _Connection:
    """What a request handler reads the request from and writes its answer
    to, in place of a socket."""

    def __init__(self, incoming: bytes) -> None:
        self.incoming = incoming
        self.outgoing = bytearray()

    def makefile(self, mode: str = "rb", *args: Any, **kwargs: Any) -> io.BytesIO:
        if "r" in mode:
            return io.BytesIO(self.incoming)
        return _Sink(self)

    def sendall(self, data: bytes) -> None:
        self.outgoing += data

    def settimeout(self, *args: Any) -> None:
        return None

    def setsockopt(self, *args: Any) -> None:
        return None

    def shutdown(self, *args: Any) -> None:
        return None

    def close(self) -> None:
        return None


class _Sink(io.BytesIO):
    def __init__(self, connection: _Connection) -> None:
        super().__init__()
        self.connection = connection

    def write(self, data: Any) -> int:
        self.connection.outgoing += bytes(data)
        return len(data)


class _Answer:
    """The bytes a handler wrote, as ``http.client`` reads a socket."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def makefile(self, mode: str = "rb", *args: Any, **kwargs: Any) -> io.BytesIO:
        return io.BytesIO(self.data)


def call(handler: "Type[http.server.BaseHTTPRequestHandler]", route: str, body: str) -> str:
    """POSTs ``body`` to ``/<route>`` of ``handler`` and returns the body of
    its 200 answer; raises ``RuntimeError`` with the hook's own words
    otherwise."""
    payload = body.encode("utf-8")
    request = (
        f"POST /{route} HTTP/1.1\r\nHost: hooks\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\n\r\n"
    ).encode("ascii") + payload
    connection = _Connection(request)
    server = _Server(("", 80), handler)
    try:
        handler(connection, ("127.0.0.1", 0), server)
    except Exception as e:  # noqa: BLE001 - the hook's exception is its failure
        raise RuntimeError(
            f"hook {route} raised {type(e).__name__}: {e}\n{traceback.format_exc(limit=8).strip()}"
        ) from None
    answer = http.client.HTTPResponse(_Answer(bytes(connection.outgoing)))  # type: ignore[arg-type]
    try:
        answer.begin()
        text = answer.read().decode("utf-8", errors="replace")
    except (http.client.HTTPException, OSError) as e:
        raise RuntimeError(f"hook {route} wrote no HTTP answer ({type(e).__name__}: {e})") from None
    if answer.status != 200:
        raise RuntimeError(f"hook {route} answered status {answer.status}: {text}")
    return text


def export_hooks(definition: str, files: Dict[str, str]) -> type:
    """The WIT export of a hook guest: ``Hooks = export_hooks(...)`` in the
    app module ``wasmop metacontroller build`` generates, with the definition
    it embeds and each hook's file by the route that reaches it. Every file
    is loaded here, when the module is built."""
    handlers = {route: load(f"wasmop_hook_{i}", path) for i, (route, path) in enumerate(sorted(files.items()))}

    class Hooks:
        def definition(self) -> str:
            return definition

        def call(self, name: str, request: str) -> str:
            handler = handlers.get(name)
            if handler is None:
                raise Err(f"no hook {name}: the hooks folder serves {', '.join(sorted(handlers)) or 'none'}")
            try:
                return call(handler, name, request)
            except RuntimeError as e:
                raise Err(str(e)) from None

    return Hooks
