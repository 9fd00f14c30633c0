// Outbound HTTP through the standard `wasi:http/outgoing-handler` import,
// with the global `fetch` of componentize-js's engine: the TypeScript
// counterpart of the Rust SDK's `wasmop_guest::http` (guests/sdk/src/http.rs).
//
// Only a guest built with `build.mjs component --http` imports `wasi:http`
// and has `fetch`; in any other build (and in unit tests under Node.js)
// every request fails with an `HttpError` of kind "unavailable", so logic
// that depends on a remote answer is tested on its failure path without a
// network. The host lets a request out only to what the guest-list entry's
// `allowedOutboundHosts` names (default: nothing), within the call's
// deadline, with at most 1 MiB of response body. A refused request is an
// `HttpError` of kind "refused" here and a Warning Event on the parent.
// Redirects are returned, not followed.
//
// A guest export that sends a request is an `async` function: componentize-js
// runs the component's event loop until the returned promise settles.

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
  headers: [string, string][];
  /** The body as text (UTF-8). */
  body: string;
}

/** Whether `response`'s status is 2xx. */
export function isSuccess(response: HttpResponse): boolean {
  return response.status >= 200 && response.status < 300;
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
 * The kind of a `fetch` failure: the engine rejects with the `wasi:http`
 * error code's name in its message; the host's refusals are
 * `HTTP-request-denied` and `destination-IP-prohibited`.
 */
export function failureKind(message: string): HttpErrorKind {
  return /request[-_ ]?denied|ip[-_ ]?prohibited/i.test(message) ? "refused" : "failed";
}

/**
 * Sends one request with an optional body (sent as
 * `content-type: application/json` when given) and reads the whole response.
 * Rejects with an `HttpError`.
 */
export async function send(method: Method, url: string, body?: string): Promise<HttpResponse> {
  splitUrl(url);
  if (!httpAvailable) {
    throw new HttpError("unavailable", "this guest was built without --http");
  }
  let response: Response;
  try {
    response = await fetch(url, {
      method,
      body,
      headers: body === undefined ? {} : { "content-type": "application/json" },
      redirect: "manual",
    });
  } catch (e) {
    const message = e instanceof Error ? e.message : String(e);
    throw new HttpError(failureKind(message), message);
  }
  let text: string;
  try {
    text = await response.text();
  } catch (e) {
    throw new HttpError("failed", `reading the body: ${e instanceof Error ? e.message : String(e)}`);
  }
  const headers: [string, string][] = [];
  response.headers.forEach((value, name) => headers.push([name.toLowerCase(), value]));
  return { status: response.status, headers, body: text };
}
