import assert from "node:assert/strict";
import { test } from "node:test";

import {
  type Condition,
  canonicalJson,
  compareUtf8,
  exportOperator,
  fnv1a64,
  GuestError,
  kinds,
  labels,
  objectMeta,
  Request,
  Response,
  rfc3339,
  setCondition,
  utf8,
} from "./index.ts";

const NOW = "2024-05-01T12:00:00Z";
const LATER = "2024-05-01T12:05:00Z";

test("times are whole seconds in UTC", () => {
  assert.equal(rfc3339(1_714_564_800n), NOW);
});

test("a condition keeps its transition time until its status flips", () => {
  const conditions: Condition[] = [];
  assert.ok(setCondition(conditions, "Ready", "False", "Creating", "", 1, NOW));
  assert.ok(!setCondition(conditions, "Ready", "False", "Creating", "", 1, LATER));
  assert.equal(conditions[0].lastTransitionTime, NOW);
  assert.ok(setCondition(conditions, "Ready", "False", "Waiting", "x", 2, LATER));
  assert.equal(conditions[0].lastTransitionTime, NOW, "reason and message are not a transition");
  assert.ok(setCondition(conditions, "Ready", "True", "Done", "", 2, LATER));
  assert.equal(conditions[0].lastTransitionTime, LATER);
  assert.equal(conditions.length, 1);
});

test("metadata carries a name and sorted labels, nothing the host stamps", () => {
  assert.deepEqual(objectMeta("demo"), { name: "demo" });
  const meta = objectMeta("demo", labels([["b", "2"], ["a", "1"]]));
  assert.deepEqual(Object.keys(meta.labels ?? {}), ["a", "b"]);
  assert.equal(JSON.stringify(meta), '{"name":"demo","labels":{"a":"1","b":"2"}}');
});

test("a child the host would refuse is refused with a clear message", () => {
  const response = new Response();
  assert.throws(() => response.child({ kind: "ConfigMap", metadata: { name: "x" } }), /no apiVersion/);
  assert.throws(() => response.child({ apiVersion: "v1", kind: "ConfigMap", metadata: {} }), /no metadata.name/);
  assert.throws(
    () =>
      response.child({
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: "x", ownerReferences: [] },
      }),
    /ownerReferences/,
  );
  assert.throws(
    () =>
      response.child({
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: "x", labels: { "wasmop.dev/guest": "other" } },
      }),
    /wasmop.dev\/guest/,
  );
  response.child({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "x" } });
  assert.equal(response.toWire().children.length, 1);
});

test("the request is parsed once and children are found by kind and name", () => {
  const request = Request.of(
    { metadata: { name: "p", generation: 3 }, status: { phase: "Ready" } },
    {
      observed: [{ apiVersion: "apps/v1", kind: "Deployment", metadata: { name: "p" } }],
      now: 1_714_564_800n,
      settings: '{"a": 1}',
    },
  );
  assert.equal(request.name, "p");
  assert.equal(request.generation, 3);
  assert.equal(request.now, NOW);
  assert.deepEqual(request.settings, { a: 1 });
  assert.equal(request.observedNamed(kinds.deployment, "p")?.metadata?.name, "p");
  assert.equal(request.observedNamed(kinds.service, "p"), undefined);
  const kept = new Response().keepObserved(request).toWire().keep;
  assert.deepEqual(kept, [{ apiVersion: "apps/v1", kind: "Deployment", name: "p" }]);
});

test("the config hash matches the Rust guest's (FNV-1a 64 of sorted compact JSON)", () => {
  // The values guests/cache-operator's `config_hash` (Rust) pins.
  assert.equal(fnv1a64(canonicalJson({})), "08f44b07b5901a25");
  assert.equal(fnv1a64(canonicalJson({ maxmemory: "256mb" })), "9bfc358df2e7da64");
  assert.equal(canonicalJson({ b: "2", a: "1", "é": "x" }), '{"a":"1","b":"2","é":"x"}');
  assert.equal(fnv1a64(""), "cbf29ce484222325");
  assert.equal(fnv1a64("a"), "af63dc4c8601ec8c");
  assert.ok(compareUtf8("Z", "a") < 0 && compareUtf8("é", "z") > 0);
  assert.deepEqual(utf8("é€😀"), [0xc3, 0xa9, 0xe2, 0x82, 0xac, 0xf0, 0x9f, 0x98, 0x80]);
});

test("thrown errors become reconcile errors the host understands", () => {
  const exported = exportOperator({
    describe: () => {
      throw new Error("no settings wanted");
    },
    reconcile: (request) => {
      if (request.name === "bug") {
        throw new TypeError("oops");
      }
      throw GuestError.permanent("spec.image must not be empty");
    },
  });
  assert.throws(() => exported.describe("{}"), (e: unknown) => {
    assert.deepEqual(e, { payload: "no settings wanted" });
    return true;
  });
  const wire = (name: string) => ({
    parent: JSON.stringify({ metadata: { name } }),
    observed: [],
    deleting: false,
    now: 0n,
    settings: undefined,
    related: [],
  });
  assert.throws(() => exported.reconcile(wire("c")), (e: unknown) => {
    assert.deepEqual(e, { payload: { kind: "permanent", message: "spec.image must not be empty" } });
    return true;
  });
  assert.throws(() => exported.reconcile(wire("bug")), (e: unknown) => {
    assert.deepEqual(e, { payload: { kind: "retryable", message: "the guest threw: oops" } });
    return true;
  });
});
