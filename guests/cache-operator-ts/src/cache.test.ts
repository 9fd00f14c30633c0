import assert from "node:assert/strict";
import { test } from "node:test";

import { type Condition, type JsonObject, Request, Response } from "../../sdk-ts/src/index.ts";
import { CacheOperator, CONFIG_HASH_ANNOTATION, configHash, FINALIZER } from "./cache.ts";

// Each stage's reconcile (new, paused, invalid, deleting, upgrading, rolled
// back) is in the shared cases (guests/cases/cache-operator), which every
// language's guest passes under `wasmop test`; these tests are of what a
// case cannot show.

const NOW = 1_714_564_800n;

function reconcileNow(request: Request): Response {
  return CacheOperator.reconcile(request);
}

function request(spec: JsonObject, observed: object[] = []): Request {
  return Request.of(
    { apiVersion: "apps.example.com/v1alpha1", kind: "Cache", metadata: { name: "demo", generation: 1 }, spec },
    { observed: observed as JsonObject[], now: NOW },
  );
}

test("describe names the Cache kind, its three child kinds and the finalizer", () => {
  const description = CacheOperator.describe(undefined);
  assert.deepEqual(description.primary, { group: "apps.example.com", version: "v1alpha1", kind: "Cache" });
  assert.deepEqual(
    description.children.map((c) => c.kind.kind),
    ["ConfigMap", "Deployment", "Service"],
  );
  assert.deepEqual(description.related, [
    { kind: { group: "", version: "v1", kind: "Secret" }, by: { tag: "name-at", val: "/spec/auth/secretRef/name" }, metadataOnly: false },
  ]);
  assert.equal(CacheOperator.describe({ version: "v1beta1" }).primary.version, "v1beta1");
  assert.equal(description.finalizer, FINALIZER);
  assert.throws(() => CacheOperator.describe({ registry: "http://x" }), /unknown setting/);
  assert.throws(() => CacheOperator.describe({ registryUrl: "ftp://x" }), /registryUrl/);
  assert.throws(() => CacheOperator.describe({ version: "v2" }), /not a Cache version/);
  assert.throws(() => CacheOperator.describe({ defaultImage: " " }), /must not be empty/);
});

/** A Deployment of one replica running `image`, as the API server shows it. */
function deploymentOf(image: string, status: object): object {
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: "demo", generation: 2 },
    spec: {
      replicas: 1,
      template: {
        metadata: { annotations: { [CONFIG_HASH_ANNOTATION]: configHash({}) } },
        spec: { containers: [{ name: "cache", image, ports: [{ containerPort: 6379 }] }] },
      },
    },
    status: { observedGeneration: 2, ...status },
  };
}

function conditionOf(status: { conditions: Condition[] }, type: string): Condition | undefined {
  return status.conditions.find((c) => c.type === type);
}

test("the upgrade timeout is the Deployment's progress deadline, 30 to 3600 seconds", () => {
  const wire = reconcileNow(request({ image: "redis:7.2", upgrade: { timeoutSeconds: 45 } })).toWire();
  const deployment = wire.children.map((c) => JSON.parse(c)).find((c) => c.kind === "Deployment");
  assert.equal(deployment.spec.progressDeadlineSeconds, 45);
  const defaulted = reconcileNow(request({ image: "redis:7.2" })).toWire();
  assert.equal(JSON.parse(defaulted.children[1]).spec.progressDeadlineSeconds, 300);
  for (const bad of [29, 3601]) {
    assert.throws(
      () => reconcileNow(request({ image: "redis:7.2", upgrade: { timeoutSeconds: bad } })),
      new RegExp(`spec.upgrade.timeoutSeconds must be between 30 and 3600, got ${bad}`),
    );
  }
});

test("a first rollout sets the last good image and is no upgrade", () => {
  const ready = deploymentOf("redis:7.2", { replicas: 1, updatedReplicas: 1, readyReplicas: 1 });
  const wire = reconcileNow(request({ image: "redis:7.2" }, [ready])).toWire();
  const status = JSON.parse(wire.status ?? "{}");
  assert.equal(status.phase, "Ready");
  assert.equal(status.lastGoodImage, "redis:7.2");
  assert.equal(conditionOf(status, "Upgrading"), undefined);
});

