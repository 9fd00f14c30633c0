import assert from "node:assert/strict";
import { test } from "node:test";

import { Request, Review } from "../../sdk-ts/src/index.ts";
import { admit } from "./admission.ts";
import { CacheOperator } from "./cache.ts";
import { convert } from "./conversion.ts";
import { REGISTRATION_REFUSED, Registry } from "./registry.ts";

const ALPHA = "apps.example.com/v1alpha1";
const BETA = "apps.example.com/v1beta1";

function cache(spec: object, apiVersion = ALPHA): { [key: string]: unknown } {
  return { apiVersion, kind: "Cache", metadata: { name: "c", namespace: "n", uid: "u" }, spec };
}

test("images without a fixed tag are denied with the reason", () => {
  for (const [image, says] of [
    ["redis", "has no tag"],
    ["redis:latest", "latest"],
    ["localhost:5000/redis", "has no tag"],
    ["redis:", "empty tag"],
  ]) {
    const response = admit(Review.of("create", cache({ image }), false));
    assert.ok(!response.allowed && response.message.includes(says), `${image}: ${response.message}`);
  }
  for (const image of ["redis:7.2", "localhost:5000/redis:7", "redis@sha256:abc"]) {
    assert.ok(admit(Review.of("create", cache({ image }), false)).allowed, image);
  }
});

test("defaulting adds the eviction policy once, in either shape, and the default image", () => {
  const patch = (spec: object, apiVersion = ALPHA, settings?: object) =>
    JSON.parse(admit(Review.of("create", cache(spec, apiVersion), true, settings)).patch ?? "[]");
  assert.deepEqual(patch({ image: "redis:7.2" }), [
    { op: "add", path: "/spec/config", value: { "maxmemory-policy": "allkeys-lru" } },
  ]);
  assert.equal(patch({ image: "redis:7.2", config: { maxmemory: "1mb" } })[0].path, "/spec/config/maxmemory-policy");
  assert.equal(patch({ image: "redis:7.2", config: [{ name: "maxmemory", value: "1mb" }] }, BETA)[0].path, "/spec/config/-");
  assert.deepEqual(patch({ config: { "redis.conf": "x" } }, ALPHA, { defaultImage: "redis:7.4" }), [
    { op: "add", path: "/spec/image", value: "redis:7.4" },
  ]);
  const unknown = admit(Review.of("create", cache({ image: "redis:7.2", config: { b: "1", a: "1" } }), false));
  assert.ok(!unknown.allowed && unknown.message.includes('"a"'), unknown.message);
});

test("a Cache round-trips through v1beta1 and what does not fit is an error naming it", () => {
  const object = cache({ image: "redis:7.2", port: 7000, config: { b: "2", a: "1" }, upgrade: { timeoutSeconds: 30 } });
  const beta = convert(JSON.parse(JSON.stringify(object)), BETA);
  assert.deepEqual(beta.spec, {
    image: "redis:7.2",
    ports: { client: 7000 },
    config: [
      { name: "a", value: "1" },
      { name: "b", value: "2" },
    ],
    upgrade: { timeoutSeconds: 30 },
  });
  assert.deepEqual(convert(beta, ALPHA), { ...object, spec: { ...(object.spec as object), config: { a: "1", b: "2" } } });
  const twice = cache({ config: [{ name: "a" }, { name: "a" }] }, BETA);
  assert.throws(() => convert(twice, ALPHA), /"a" twice/);
  assert.throws(() => convert(cache({ ports: { client: 1, admin: 2 } }, BETA), ALPHA), /ports\.admin/);
  assert.throws(() => convert(cache({}), "apps.example.com/v9"), /from v1alpha1 to v9/);
  assert.throws(() => convert(cache({}), "other.example.com/v1beta1"), /group/);
});

test("a missing password Secret holds the Cache Pending and a found one rolls the pods with its hash", () => {
  const request = (related: object[]) =>
    new Request({
      parent: JSON.stringify(cache({ image: "redis:7.2", auth: { secretRef: { name: "creds", key: "password" } } })),
      observed: [],
      deleting: false,
      now: 1_714_564_800n,
      settings: undefined,
      related: related.map((o) => ({ apiVersion: "v1", kind: "Secret", name: "creds", object: JSON.stringify(o) })),
    });
  const wire = CacheOperator.reconcile(request([])).toWire();
  assert.equal(JSON.parse(wire.status ?? "{}").phase, "Pending");
  assert.deepEqual(
    wire.events.map((e) => e.reason),
    ["SecretMissing", "PhaseChanged"],
  );
  const found = CacheOperator.reconcile(request([{ metadata: { name: "creds" }, data: { password: "czNjcjN0" } }]));
  const deployment = found.toWire().children.map((c) => JSON.parse(c)).find((c) => c.kind === "Deployment");
  assert.equal(deployment.spec.template.spec.containers[0].env[0].valueFrom.secretKeyRef.name, "creds");
  assert.match(deployment.spec.template.metadata.annotations["apps.example.com/secret-hash"], /^[0-9a-f]{16}$/);
});

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
