"""Outbound HTTP through the standard ``wasi:http/outgoing-handler`` import:
the Python counterpart of the Rust SDK's ``wasmop_guest::http``
(``guests/sdk/src/http.rs``).

componentize-py's runtime has no sockets for ``urllib`` or ``http.client``;
this module drives the ``wasi:http`` bindings componentize-py generates for a
guest built with ``build.py component --http``. In any other build (and in
unit tests) ``AVAILABLE`` is false and every request fails with an
``HttpError`` of kind ``unavailable``, so logic that depends on a remote
answer is tested on its failure path without a network.

The host lets a request out only to what the guest-list entry's
``allowedOutboundHosts`` names (default: nothing), within the call's
deadline, with at most 1 MiB of response body. A refused request is an
``HttpError`` of kind ``refused`` here and a Warning Event on the parent.
Redirects are returned, not followed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional, Tuple

try:
    from componentize_py_types import Err
    from wit_world.imports import http_types, outgoing_handler, streams

    #: Whether this build can send requests (``build.py component --http``).
    AVAILABLE = True
except ImportError:
    AVAILABLE = False

__all__ = ["AVAILABLE", "HttpError", "HttpResponse", "send", "split_url"]

#: Bytes read per call from the response body.
_CHUNK = 64 << 10


@dataclass
class HttpResponse:
    """A response: its status, headers and body."""

    #: The HTTP status code.
    status: int
    #: The headers, names in lower case, in the order received.
    headers: List[Tuple[str, bytes]] = field(default_factory=list)
    #: The body.
    body: bytes = b""

    def is_success(self) -> bool:
        """Whether the status is 2xx."""
        return 200 <= self.status < 300

    def header(self, name: str) -> Optional[str]:
        """The first value of header ``name`` (lower case) as text."""
        return next((v.decode("utf-8", "replace") for n, v in self.headers if n == name), None)


class HttpError(Exception):
    """Why a request got no response: ``invalid_url`` (not
    ``http(s)://host…``), ``refused`` (the host refused it: not in
    ``allowedOutboundHosts``, or an address it does not allow), ``failed``
    (connection, TLS, timeout, size) or ``unavailable`` (no outbound HTTP in
    this build). ``str()`` words it as the Rust SDK does."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message

    def __str__(self) -> str:
        return {
            "invalid_url": f'invalid URL "{self.message}"',
            "refused": f"refused by the host: {self.message}",
            "failed": f"request failed: {self.message}",
            "unavailable": f"outbound HTTP is unavailable: {self.message}",
        }[self.kind]


def split_url(url: str) -> Tuple[str, str, str]:
    """``https`` or ``http``, the authority and the path with query of ``url``."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in ("http", "https"):
        raise HttpError("invalid_url", url)
    slash = rest.find("/")
    authority, path = (rest, "/") if slash < 0 else (rest[:slash], rest[slash:])
    if not authority:
        raise HttpError("invalid_url", url)
    return scheme, authority, path


def _code_name(code: object) -> str:
    """A ``wasi:http`` error code as the Rust SDK prints it:
    ``ErrorCode::HttpRequestDenied``."""
    return "ErrorCode::" + type(code).__name__.removeprefix("ErrorCode_")


def _failed(code: object) -> HttpError:
    name = _code_name(code)
    refused = name in ("ErrorCode::HttpRequestDenied", "ErrorCode::DestinationIpProhibited")
    return HttpError("refused" if refused else "failed", name)


def _stream_error_name(error: object) -> str:
    """A ``wasi:io`` stream error as the Rust SDK prints it: ``StreamError::Closed``."""
    return "StreamError::" + type(error).__name__.removeprefix("StreamError_")


def send(method: str, url: str, body: Optional[bytes] = None) -> HttpResponse:
    """Sends one request (``method`` one of GET, PUT, POST, DELETE) with an
    optional body (sent as ``content-type: application/json`` with its
    ``content-length`` when given) and reads the whole response. Raises
    ``HttpError``."""
    scheme, authority, path = split_url(url)
    if not AVAILABLE:
        raise HttpError("unavailable", "this guest was built without --http")
    methods = {
        "GET": http_types.Method_Get(),
        "PUT": http_types.Method_Put(),
        "POST": http_types.Method_Post(),
        "DELETE": http_types.Method_Delete(),
    }
    if method not in methods:
        raise ValueError(f"method {method!r} is not one of {', '.join(methods)}")
    headers = http_types.Fields()
    if body is not None:
        headers.append("content-type", b"application/json")
        headers.append("content-length", str(len(body)).encode())
    request = http_types.OutgoingRequest(headers)
    try:
        request.set_method(methods[method])
        request.set_scheme(http_types.Scheme_Https() if scheme == "https" else http_types.Scheme_Http())
        request.set_authority(authority)
        request.set_path_with_query(path)
    except Err:
        raise HttpError("invalid_url", url) from None
    outgoing = request.body()
    try:
        future = outgoing_handler.handle(request, None)
    except Err as e:
        raise _failed(e.value) from None
    # A server may answer before it reads the body, and the body stream then
    # closes: that answer, or the host's refusal, is still the outcome.
    write_error: Optional[HttpError] = None
    if body is not None:
        stream = outgoing.write()
        try:
            for at in range(0, len(body), 4096):
                stream.blocking_write_and_flush(body[at : at + 4096])
        except Err as e:
            write_error = HttpError("failed", f"writing the body: {_stream_error_name(e.value)}")
        stream.__exit__(None, None, None)
    try:
        http_types.OutgoingBody.finish(outgoing, None)
    except Err as e:
        write_error = write_error or _failed(e.value)
    pollable = future.subscribe()
    pollable.block()
    pollable.__exit__(None, None, None)
    outcome = future.get()
    if outcome is None or isinstance(outcome, Err):
        raise write_error or HttpError("failed", "no response")
    answer = outcome.value
    if isinstance(answer, Err):
        raise _failed(answer.value)
    response = answer.value
    status = response.status()
    received = [(name.lower(), value) for name, value in response.headers().entries()]
    incoming = response.consume()
    stream = incoming.stream()
    chunks = []
    while True:
        try:
            chunks.append(stream.blocking_read(_CHUNK))
        except Err as e:
            if isinstance(e.value, streams.StreamError_Closed):
                break
            raise HttpError("failed", f"reading the body: {_stream_error_name(e.value)}") from None
    stream.__exit__(None, None, None)
    http_types.IncomingBody.finish(incoming)
    return HttpResponse(status=status, headers=received, body=b"".join(chunks))
