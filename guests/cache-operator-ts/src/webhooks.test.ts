import assert from "node:assert/strict";
import { test } from "node:test";

import { REGISTRATION_REFUSED, Registry } from "./registry.ts";

// Admission, conversion and the password Secret are in the shared cases
// (guests/cases/cache-operator), which every language's guest passes.

test("a registration that cannot be sent is refused and backs off", () => {
  const registry = new Registry("http://r.example.com:8089/", "c1", "team", 6380, 2);
  assert.equal(registry.url, "http://r.example.com:8089/caches/team/c1");
  assert.equal(registry.address(), "c1.team.svc:6380");
  const status = { conditions: [] };
  let [event, wait] = registry.register(status, "2024-05-01T12:00:00Z");
  assert.equal(event?.[1], REGISTRATION_REFUSED);
  assert.equal(wait, 2);
  [event, wait] = registry.register(status, "2024-05-01T12:00:40Z");
  assert.equal(event, undefined);
  assert.equal(wait, 40);
  assert.deepEqual(registry.deregister(undefined, "2024-05-01T12:00:40Z"), { kind: "notRegistered" });
  assert.deepEqual(registry.deregister(status, "2024-05-01T12:00:40Z"), { kind: "notRegistered" });
});
