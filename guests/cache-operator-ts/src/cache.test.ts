import assert from "node:assert/strict";
import { test } from "node:test";

import { type ReconcileRequest, Request } from "../../sdk-ts/src/index.ts";
import { CacheOperator, CONFIG_HASH_ANNOTATION, configHash, FINALIZER } from "./cache.ts";

const NOW = 1_714_564_800n;

function request(spec: object, observed: object[] = [], extra: Partial<ReconcileRequest> = {}): Request {
  return new Request({
    parent: JSON.stringify({
      apiVersion: "apps.example.com/v1alpha1",
      kind: "Cache",
      metadata: { name: "demo", generation: 1 },
      spec,
    }),
    observed: observed.map((o) => {
      const object = o as { apiVersion: string; kind: string; metadata: { name: string } };
      return { apiVersion: object.apiVersion, kind: object.kind, name: object.metadata.name, object: JSON.stringify(o) };
    }),
    deleting: false,
    now: NOW,
    settings: undefined,
    related: [],
    ...extra,
  });
}

test("describe names the Cache kind, its three child kinds and the finalizer", () => {
  const description = CacheOperator.describe(undefined);
  assert.deepEqual(description.primary, { group: "apps.example.com", version: "v1alpha1", kind: "Cache" });
  assert.deepEqual(
    description.children.map((c) => c.kind.kind),
    ["ConfigMap", "Deployment", "Service"],
  );
  assert.equal(description.finalizer, FINALIZER);
  assert.throws(() => CacheOperator.describe({ registryUrl: "http://x" }), /unknown setting/);
  assert.throws(() => CacheOperator.describe({ defaultImage: " " }), /must not be empty/);
});

test("a new Cache gets its ConfigMap, Deployment and Service and is Pending", () => {
  const wire = CacheOperator.reconcile(
    request({ image: "redis:7.2", replicas: 2, config: { maxmemory: "256mb" } }),
  ).toWire();
  const children = wire.children.map((c) => JSON.parse(c));
  assert.deepEqual(
    children.map((c) => `${c.kind}/${c.metadata.name}`),
    ["ConfigMap/demo-config", "Deployment/demo", "Service/demo"],
  );
  const deployment = children[1];
  assert.equal(deployment.spec.replicas, 2);
  assert.equal(deployment.spec.template.metadata.annotations[CONFIG_HASH_ANNOTATION], "9bfc358df2e7da64");
  assert.equal(configHash({ maxmemory: "256mb" }), "9bfc358df2e7da64");
  const status = JSON.parse(wire.status ?? "{}");
  assert.equal(status.phase, "Pending");
  assert.deepEqual(
    wire.events.map((e) => e.reason),
    ["Created", "PhaseChanged"],
  );
});

test("an invalid spec is a permanent error", () => {
  assert.throws(() => CacheOperator.reconcile(request({ image: "redis", replicas: 11 })), /between 1 and 10/);
  assert.throws(() => CacheOperator.reconcile(request({ image: "" })), /spec.image must not be empty/);
});

test("a paused Cache keeps every child as it is", () => {
  const observed = [{ apiVersion: "v1", kind: "Service", metadata: { name: "demo" } }];
  const wire = CacheOperator.reconcile(request({ image: "redis", paused: true }, observed)).toWire();
  assert.deepEqual(wire.children, []);
  assert.deepEqual(wire.keep, [{ apiVersion: "v1", kind: "Service", name: "demo" }]);
  assert.equal(JSON.parse(wire.status ?? "{}").phase, "Paused");
});

test("deletion scales the Deployment to zero, then lets the Cache go", () => {
  const running = {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: "demo" },
    spec: { replicas: 2 },
    status: { replicas: 2 },
  };
  const scaling = CacheOperator.reconcile(request({ image: "redis" }, [running], { deleting: true })).toWire();
  assert.equal(scaling.finalized, false);
  assert.equal(JSON.parse(scaling.children[0]).spec.replicas, 0);
  assert.equal(scaling.requeueAfterSeconds, 2);
  const stopped = { ...running, status: { replicas: 0 } };
  const done = CacheOperator.reconcile(request({ image: "redis" }, [stopped], { deleting: true })).toWire();
  assert.equal(done.finalized, true);
  assert.deepEqual(
    done.events.map((e) => e.reason),
    ["CleanupComplete"],
  );
});
