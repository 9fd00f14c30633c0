import assert from "node:assert/strict";
import { test } from "node:test";

import { Request } from "../sdk/index.ts";
import { Guest } from "./guest.ts";

test("a parent gets its ConfigMap and is Ready", () => {
  const response = Guest.reconcile(
    Request.of(
      {
        apiVersion: "{{group}}/v1alpha1",
        kind: "{{Kind}}",
        metadata: { name: "sample", generation: 1 },
        spec: { data: { greeting: "hello" } },
      },
      { now: 1_714_564_800n },
    ),
  ).toWire();
  const configMap = JSON.parse(response.children[0]);
  assert.equal(configMap.metadata.name, "sample-data");
  assert.equal(configMap.data.greeting, "hello");
  assert.equal(JSON.parse(response.status ?? "{}").conditions[0].status, "True");
});
