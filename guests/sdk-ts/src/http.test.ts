import assert from "node:assert/strict";
import { test } from "node:test";

import { errorCodeName, failure, HttpError, httpAvailable, httpBuild, send, splitUrl } from "./index.ts";

test("URLs split into scheme, authority and path", () => {
  assert.deepEqual(splitUrl("https://r.example.com:8443/caches/a/b?x=1"), ["https", "r.example.com:8443", "/caches/a/b?x=1"]);
  assert.deepEqual(splitUrl("http://127.0.0.1:8089"), ["http", "127.0.0.1:8089", "/"]);
  assert.throws(() => splitUrl("ftp://x/"), HttpError);
  assert.throws(() => splitUrl("http:///x"), HttpError);
});

test("without --http every request fails as unavailable, sending nothing", () => {
  assert.equal(httpAvailable, false);
  assert.equal(httpBuild, "native");
  assert.throws(
    () => send("GET", "http://127.0.0.1/"),
    (e: unknown) => e instanceof HttpError && e.kind === "unavailable",
  );
  assert.throws(
    () => send("GET", "nope"),
    (e: unknown) => e instanceof HttpError && e.kind === "invalidUrl",
  );
});

test("the host's refusals are told from other failures and worded as the Rust SDK words them", () => {
  assert.equal(failure("HTTP-request-denied").kind, "refused");
  assert.equal(failure("destination-IP-prohibited").kind, "refused");
  assert.equal(failure("connection-refused").kind, "failed");
  assert.equal(errorCodeName("DNS-timeout"), "ErrorCode::DnsTimeout");
  assert.equal(failure("HTTP-request-denied").toString(), "refused by the host: ErrorCode::HttpRequestDenied");
  assert.equal(failure("connection-timeout").toString(), "request failed: ErrorCode::ConnectionTimeout");
});
