import assert from "node:assert/strict";
import { test } from "node:test";

import { allow, deny, exportAdmission, Patch, pointerSegment, refusedPath, Review } from "./index.ts";

test("a patch is a JSON Patch, and none when empty", () => {
  assert.equal(new Patch().allow().patch, undefined);
  const response = new Patch().add(`/spec/${pointerSegment("a/b")}`, 1).allow(["careful"]);
  assert.ok(response.allowed);
  assert.deepEqual(response.warnings, ["careful"]);
  assert.deepEqual(JSON.parse(response.patch ?? "[]"), [{ op: "add", path: "/spec/a~1b", value: 1 }]);
  assert.equal(pointerSegment("a/b~c"), "a~1b~0c");
});

test("a patch refuses every path the host refuses, naming it", () => {
  for (const [pointer, says] of [
    ["/apiVersion", "apiVersion"],
    ["/kind", "kind"],
    ["/status/phase", "status"],
    ["/metadata/name", "metadata.name"],
    ["/metadata/ownerReferences", "metadata.ownerReferences"],
    ["/metadata/labels/wasmop.dev~1guest", "metadata.labels.wasmop.dev/guest"],
    ["", "the whole object"],
  ] as const) {
    assert.throws(() => new Patch().add(pointer, "x"), new RegExp(says.replace(/\./g, "\\.")), pointer);
  }
  assert.throws(() => new Patch().add("/metadata/labels", { "wasmop.dev/x": "1" }), /wasmop\.dev\/x/);
  assert.throws(() => new Patch().remove("/metadata/annotations"), /as a whole/);
  assert.throws(() => new Patch().add("spec", 1), /not a JSON pointer/);
  assert.equal(refusedPath("/metadata/labels/team"), undefined);
  assert.equal(refusedPath("/metadata/labels", { team: "a" }), undefined);
  new Patch().add("/metadata/annotations/team", "a").replace("/spec/replicas", 2).remove("/spec/paused");
});

test("a denial carries its message and an HTTP error code", () => {
  assert.deepEqual(deny("no"), { allowed: false, message: "no", code: undefined, patch: undefined, warnings: [] });
  assert.equal(deny("no", 422).code, 422);
  assert.throws(() => deny("no", 200), /400-599/);
  assert.ok(allow().allowed);
});

test("the review parses its objects and settings once", () => {
  const review = Review.of("create", { spec: { x: 1 } }, true, { defaultImage: "redis:7.2" });
  assert.deepEqual(review.object, { spec: { x: 1 } });
  assert.equal(review.oldObject, undefined);
  assert.ok(review.mutating);
  assert.equal(review.operation, "create");
  assert.deepEqual(review.settings, { defaultImage: "redis:7.2" });
});

test("something thrown in admit is the guest's failure, not a verdict", () => {
  const exported = exportAdmission({
    admit() {
      throw new Error("a bug");
    },
  });
  assert.throws(() => exported.admit(Review.of("create", {}, true).wire), /a bug/);
  const fine = exportAdmission({ admit: (r) => (r.mutating ? new Patch().add("/spec/a", 1).allow() : allow()) });
  assert.ok(fine.admit(Review.of("create", { spec: {} }, true).wire).patch?.includes("/spec/a"));
});
