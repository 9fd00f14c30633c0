import assert from "node:assert/strict";
import { test } from "node:test";

import { type Condition, type ReconcileRequest, Request, Response } from "../../sdk-ts/src/index.ts";
import { CacheOperator, CONFIG_HASH_ANNOTATION, configHash, FINALIZER } from "./cache.ts";

const NOW = 1_714_564_800n;

function reconcileNow(request: Request): Response {
  return CacheOperator.reconcile(request);
}

function request(
  spec: object,
  observed: object[] = [],
  extra: Partial<ReconcileRequest> = {},
  status?: object,
): Request {
  return new Request({
    parent: JSON.stringify({
      apiVersion: "apps.example.com/v1alpha1",
      kind: "Cache",
      metadata: { name: "demo", generation: 1 },
      spec,
      ...(status === undefined ? {} : { status }),
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

test("a new Cache gets its ConfigMap, Deployment and Service and is Pending", () => {
  const wire = reconcileNow(
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
  assert.throws(() => reconcileNow(request({ image: "redis", replicas: 11 })), /between 1 and 10/);
  assert.throws(() => reconcileNow(request({ image: "" })), /spec.image must not be empty/);
});

test("a paused Cache keeps every child as it is", () => {
  const observed = [{ apiVersion: "v1", kind: "Service", metadata: { name: "demo" } }];
  const wire = reconcileNow(request({ image: "redis", paused: true }, observed)).toWire();
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
  const scaling = reconcileNow(request({ image: "redis" }, [running], { deleting: true })).toWire();
  assert.equal(scaling.finalized, false);
  assert.equal(JSON.parse(scaling.children[0]).spec.replicas, 0);
  assert.equal(scaling.requeueAfterSeconds, 2);
  const stopped = { ...running, status: { replicas: 0 } };
  const done = reconcileNow(request({ image: "redis" }, [stopped], { deleting: true })).toWire();
  assert.equal(done.finalized, true);
  assert.deepEqual(
    done.events.map((e) => e.reason),
    ["CleanupComplete"],
  );
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

type Wire = ReturnType<Response["toWire"]>;

function imageOf(wire: Wire): string {
  const deployment = wire.children.map((c) => JSON.parse(c)).find((c) => c.kind === "Deployment");
  return deployment.spec.template.spec.containers[0].image;
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

test("a new image rolls out while the Cache stays Ready, then completes with one Upgraded event", () => {
  const old = deploymentOf("redis:7.2", { replicas: 1, updatedReplicas: 1, readyReplicas: 1 });
  const rolling = reconcileNow(
    request({ image: "redis:7.4" }, [old], {}, { phase: "Ready", lastGoodImage: "redis:7.2" }),
  ).toWire();
  assert.equal(imageOf(rolling), "redis:7.4");
  const status = JSON.parse(rolling.status ?? "{}");
  assert.equal(status.phase, "Ready");
  assert.deepEqual(
    [conditionOf(status, "Upgrading")?.status, conditionOf(status, "Upgrading")?.reason],
    ["True", "RollingOut"],
  );
  const done = deploymentOf("redis:7.4", { replicas: 1, updatedReplicas: 1, readyReplicas: 1 });
  const complete = reconcileNow(request({ image: "redis:7.4" }, [done], {}, status)).toWire();
  assert.deepEqual(
    complete.events.map((e) => [e.eventType, e.reason]),
    [["normal", "Upgraded"]],
  );
  const after = JSON.parse(complete.status ?? "{}");
  assert.equal(after.lastGoodImage, "redis:7.4");
  assert.equal(conditionOf(after, "Upgraded")?.status, "True");
});

test("a rollout past its deadline goes back to the last good image and is not tried again", () => {
  const stuck = deploymentOf("redis:7.4-never-ready", {
    replicas: 2,
    updatedReplicas: 1,
    readyReplicas: 1,
    conditions: [{ type: "Progressing", status: "False", reason: "ProgressDeadlineExceeded" }],
  });
  const spec = { image: "redis:7.4-never-ready", upgrade: { timeoutSeconds: 30 } };
  const back = reconcileNow(
    request(spec, [stuck], {}, { phase: "Ready", lastGoodImage: "redis:7.2" }),
  ).toWire();
  assert.equal(imageOf(back), "redis:7.2");
  assert.deepEqual(
    back.events.map((e) => [e.eventType, e.reason]),
    [
      ["normal", "ImageChanged"],
      ["warning", "UpgradeRolledBack"],
      ["normal", "PhaseChanged"],
    ],
  );
  const status = JSON.parse(back.status ?? "{}");
  assert.equal(status.phase, "Degraded");
  assert.equal(status.failedImage, "redis:7.4-never-ready");
  assert.match(conditionOf(status, "Upgraded")?.message ?? "", /redis:7.4-never-ready/);
  const held = reconcileNow(request(spec, [stuck], {}, status)).toWire();
  assert.equal(imageOf(held), "redis:7.2");
  assert.deepEqual(JSON.parse(held.status ?? "{}").conditions, status.conditions);
});
