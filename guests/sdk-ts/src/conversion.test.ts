import assert from "node:assert/strict";
import { test } from "node:test";

import { type Conversion, convertAll, exportConversion, splitApiVersion } from "./index.ts";

const object = {
  apiVersion: "example.com/v1",
  kind: "Thing",
  metadata: { name: "a", namespace: "n", uid: "u", labels: { x: "1" } },
  spec: { size: 1 },
};

const renaming: Conversion = {
  convert(o, desired) {
    const spec = o.spec as { size: number };
    return { ...o, apiVersion: desired, spec: { bytes: spec.size } };
  },
};

test("every object is converted in order and keeps its identity", () => {
  const out = convertAll(renaming, [JSON.stringify(object), JSON.stringify({ ...object, spec: { size: 2 } })], "example.com/v2");
  assert.deepEqual(
    out.map((t) => JSON.parse(t).spec),
    [{ bytes: 1 }, { bytes: 2 }],
  );
  assert.equal(JSON.parse(out[0]).apiVersion, "example.com/v2");
  assert.deepEqual(splitApiVersion("apps/v1"), ["apps", "v1"]);
  assert.deepEqual(splitApiVersion("v1"), ["", "v1"]);
});

test("an answer that breaks what the host checks is refused, naming the field", () => {
  const bad = (change: (o: Record<string, unknown>) => Record<string, unknown>): Conversion => ({
    convert: (o, desired) => change({ ...o, apiVersion: desired }),
  });
  const cases: [Conversion, RegExp][] = [
    [bad((o) => ({ ...o, metadata: { ...(o.metadata as object), name: "b" } })), /metadata\.name/],
    [bad((o) => ({ ...o, metadata: { ...(o.metadata as object), uid: "v" } })), /metadata\.uid/],
    [bad((o) => ({ ...o, kind: "Other" })), /kind/],
    [{ convert: (o) => o }, /not example\.com\/v2/],
  ];
  for (const [conversion, says] of cases) {
    assert.throws(() => convertAll(conversion, [JSON.stringify(object)], "example.com/v2"), says);
  }
  assert.throws(() => convertAll(renaming, ["{"], "example.com/v2"), /object 0 is not JSON/);
});

test("a thrown conversion error is the WIT's error with its message", () => {
  const exported = exportConversion({
    convert() {
      throw new Error("cannot convert to v9");
    },
  });
  assert.throws(
    () => exported.convert([JSON.stringify(object)], "example.com/v9"),
    (e: unknown) => (e as { payload: string }).payload === "cannot convert to v9",
  );
});
