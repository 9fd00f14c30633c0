import assert from "node:assert/strict";
import { test } from "node:test";

import { failureKind, HttpError, httpAvailable, send, splitUrl } from "./index.ts";

test("URLs split into scheme, authority and path", () => {
  assert.deepEqual(splitUrl("https://r.example.com:8443/caches/a/b?x=1"), ["https", "r.example.com:8443", "/caches/a/b?x=1"]);
  assert.deepEqual(splitUrl("http://127.0.0.1:8089"), ["http", "127.0.0.1:8089", "/"]);
  assert.throws(() => splitUrl("ftp://x/"), HttpError);
  assert.throws(() => splitUrl("http:///x"), HttpError);
});

test("without --http every request fails as unavailable, sending nothing", async () => {
  assert.equal(httpAvailable, false);
  await assert.rejects(send("GET", "http://127.0.0.1/"), (e: unknown) => e instanceof HttpError && e.kind === "unavailable");
  await assert.rejects(send("GET", "nope"), (e: unknown) => e instanceof HttpError && e.kind === "invalidUrl");
});

test("the host's refusals are told from other failures", () => {
  assert.equal(failureKind("HTTP-request-denied"), "refused");
  assert.equal(failureKind("destination-IP-prohibited"), "refused");
  assert.equal(failureKind("connection-refused"), "failed");
  assert.equal(new HttpError("refused", "HTTP-request-denied").toString(), "refused by the host: HTTP-request-denied");
});
