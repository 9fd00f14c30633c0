// Outbound HTTP through the standard `wasi:http/outgoing-handler` import:
// the TypeScript counterpart of the Rust SDK's `wasmop_guest::http`
// (guests/sdk/src/http.rs), over the bindings componentize-js generates for
// a world that imports `wasi:http`.
//
// Only a guest built with `build.mjs component --http` imports `wasi:http`;
// in any other build (and in unit tests under Node.js) every request fails
// with an `HttpError` of kind "unavailable", so logic that depends on a
// remote answer is tested on its failure path without a network. The host
// lets a request out only to what the guest-list entry's
// `allowedOutboundHosts` names (default: nothing), within the call's
// deadline, with at most 1 MiB of response body. A refused request is an
// `HttpError` of kind "refused" here and a Warning Event on the parent.
// Redirects are returned, not followed. Errors are worded as the Rust SDK
// words them (`refused by the host: ErrorCode::HttpRequestDenied`), so the
// three languages report the same failure alike.
//
// componentize-js's own `fetch` (its `http` feature) is not used: in
// componentize-js 0.23.0 a request the host refuses makes it execute
// `unreachable` (the whole call traps) instead of rejecting, and a failed
// request rejects with no error code ("NetworkError when attempting to
// fetch resource").

import { handle } from "wasi:http/outgoing-handler@0.2.12";
import { Fields, IncomingBody, OutgoingBody, OutgoingRequest } from "wasi:http/types@0.2.12";

/**
 * Set by `build.mjs component`: true with `--http`, false without; not set
 * in unit tests under Node.js.
 */
declare const __WASMOP_HTTP__: boolean | undefined;

/**
 * What this build is: a component with outbound HTTP ("http", `build.mjs
 * component --http`), a component without ("log-only"), or the guest's code
 * under Node.js ("native", unit tests). Only "http" sends requests.
 */
export const httpBuild: "http" | "log-only" | "native" =
  typeof __WASMOP_HTTP__ === "undefined" ? "native" : __WASMOP_HTTP__ ? "http" : "log-only";

/** Whether this build can send requests (`build.mjs component --http`). */
export const httpAvailable: boolean = httpBuild === "http";

/** An HTTP method. */
export type Method = "GET" | "PUT" | "POST" | "DELETE";

/** A response: its status, headers and body. */
export interface HttpResponse {
  /** The HTTP status code. */
  status: number;
  /** The headers, names in lower case, in the order received. */
  headers: [string, Uint8Array][];
  /** The body. */
  body: Uint8Array;
}

/** Whether `response`'s status is 2xx. */
export function isSuccess(response: HttpResponse): boolean {
  return response.status >= 200 && response.status < 300;
}

/** The body of `response` as text (UTF-8). */
export function bodyText(response: HttpResponse): string {
  return new TextDecoder().decode(response.body);
}

/**
 * Why a request got no response: "invalidUrl" (not `http(s)://host…`),
 * "refused" (the host refused it: not in `allowedOutboundHosts`, or an
 * address it does not allow), "failed" (connection, TLS, timeout, size) or
 * "unavailable" (no outbound HTTP in this build).
 */
export type HttpErrorKind = "invalidUrl" | "refused" | "failed" | "unavailable";

/** A request that got no response. */
export class HttpError extends Error {
  readonly kind: HttpErrorKind;

  constructor(kind: HttpErrorKind, message: string) {
    super(message);
    this.kind = kind;
  }

  /** As the Rust SDK words it: `refused by the host: …`, `request failed: …`. */
  override toString(): string {
    switch (this.kind) {
      case "invalidUrl":
        return `invalid URL ${JSON.stringify(this.message)}`;
      case "refused":
        return `refused by the host: ${this.message}`;
      case "failed":
        return `request failed: ${this.message}`;
      case "unavailable":
        return `outbound HTTP is unavailable: ${this.message}`;
    }
  }
}

/** `https` or `http`, the authority and the path with query of `url`. */
export function splitUrl(url: string): [string, string, string] {
  const invalid = new HttpError("invalidUrl", url);
  const at = url.indexOf("://");
  if (at < 0) {
    throw invalid;
  }
  const scheme = url.slice(0, at);
  const rest = url.slice(at + 3);
  if (scheme !== "http" && scheme !== "https") {
    throw invalid;
  }
  const slash = rest.indexOf("/");
  const [authority, path] = slash < 0 ? [rest, "/"] : [rest.slice(0, slash), rest.slice(slash)];
  if (authority === "") {
    throw invalid;
  }
  return [scheme, authority, path];
}

/**
 * A `wasi:http` error code (its WIT case name, `HTTP-request-denied`) as
 * the Rust SDK prints it: `ErrorCode::HttpRequestDenied`.
 */
export function errorCodeName(tag: string): string {
  const camel = tag
    .split("-")
    .map((part) => part.charAt(0).toUpperCase() + part.slice(1).toLowerCase())
    .join("");
  return `ErrorCode::${camel}`;
}

/** The error of a request that failed with the `wasi:http` error code `tag`. */
export function failure(tag: string): HttpError {
  const refused = tag === "HTTP-request-denied" || tag === "destination-IP-prohibited";
  return new HttpError(refused ? "refused" : "failed", errorCodeName(tag));
}

/** A `wasi:io` stream error (`{tag: "closed"}`) as the Rust SDK prints it. */
function streamErrorName(e: unknown): string {
  const tag = (e as { payload?: { tag?: string } })?.payload?.tag;
  return tag === "closed" ? "StreamError::Closed" : "StreamError::LastOperationFailed";
}

/**
 * Drops a `wasi:http` or `wasi:io` resource now, as the WIT requires of a
 * child (a body's stream) before its parent is finished: the bindings name
 * the method `Symbol.dispose`, or `Symbol.for("dispose")` where the engine
 * has no `Symbol.dispose`.
 */
function dispose(resource: object): void {
  const key = (Symbol as unknown as { dispose?: symbol }).dispose ?? Symbol.for("dispose");
  (resource as { [key: symbol]: (() => void) | undefined })[key]?.();
}

/** The payload of a WIT error thrown by the bindings. */
function payloadOf(e: unknown): unknown {
  return (e as { payload?: unknown })?.payload;
}

/** Bytes read per call from the response body. */
const CHUNK = 64n << 10n;

/**
 * Sends one request with an optional body (sent as
 * `content-type: application/json` when given) and reads the whole
 * response. Throws an `HttpError`.
 */
export function send(method: Method, url: string, body?: string | Uint8Array): HttpResponse {
  const [scheme, authority, path] = splitUrl(url);
  if (!httpAvailable) {
    throw new HttpError("unavailable", "this guest was built without --http");
  }
  const bytes = typeof body === "string" ? new TextEncoder().encode(body) : body;
  const headers = new Fields();
  if (bytes !== undefined) {
    headers.append("content-type", new TextEncoder().encode("application/json"));
  }
  const request = new OutgoingRequest(headers);
  try {
    request.setMethod({ tag: method.toLowerCase() as "get" | "put" | "post" | "delete" });
    request.setScheme({ tag: scheme === "https" ? "HTTPS" : "HTTP" });
    request.setAuthority(authority);
    request.setPathWithQuery(path);
  } catch {
    throw new HttpError("invalidUrl", url);
  }
  const outgoing = request.body();
  let future;
  try {
    future = handle(request, undefined);
  } catch (e) {
    throw failure((payloadOf(e) as { tag: string }).tag);
  }
  // A server may answer before it reads the body, and the body stream then
  // closes: that answer, or the host's refusal, is still the outcome.
  let writeError: HttpError | undefined;
  if (bytes !== undefined) {
    const stream = outgoing.write();
    try {
      for (let at = 0; at < bytes.length; at += 4096) {
        stream.blockingWriteAndFlush(bytes.subarray(at, at + 4096));
      }
    } catch (e) {
      writeError = new HttpError("failed", `writing the body: ${streamErrorName(e)}`);
    }
    dispose(stream);
  }
  try {
    OutgoingBody.finish(outgoing, undefined);
  } catch (e) {
    writeError ??= failure((payloadOf(e) as { tag: string }).tag);
  }
  const pollable = future.subscribe();
  pollable.block();
  dispose(pollable);
  const outcome = future.get();
  dispose(future);
  if (outcome === undefined || outcome.tag === "err") {
    throw writeError ?? new HttpError("failed", "no response");
  }
  if (outcome.val.tag === "err") {
    throw failure(outcome.val.val.tag);
  }
  const response = outcome.val.val;
  const status = response.status();
  const received: [string, Uint8Array][] = response
    .headers()
    .entries()
    .map(([name, value]): [string, Uint8Array] => [name.toLowerCase(), value]);
  const incoming = response.consume();
  const input = incoming.stream();
  const chunks: Uint8Array[] = [];
  for (;;) {
    try {
      chunks.push(input.blockingRead(CHUNK));
    } catch (e) {
      if ((payloadOf(e) as { tag?: string })?.tag === "closed") {
        break;
      }
      dispose(input);
      throw new HttpError("failed", `reading the body: ${streamErrorName(e)}`);
    }
  }
  dispose(input);
  dispose(IncomingBody.finish(incoming));
  dispose(response);
  const length = chunks.reduce((n, c) => n + c.length, 0);
  const all = new Uint8Array(length);
  let at = 0;
  for (const chunk of chunks) {
    all.set(chunk, at);
    at += chunk.length;
  }
  return { status, headers: received, body: all };
}
