// Defaulting and validation of a Cache, served by the host as admission
// webhooks (the Rust guest's `admission.rs`).
//
// Defaults: `spec.image` from the setting `defaultImage` when empty, and the
// Redis directive `maxmemory-policy` (`allkeys-lru`) when `config` sets
// neither it nor a whole file (`*.conf`). Validation, beyond what the CRD's
// schema and CEL say: the image must name a tag other than `latest` (or a
// digest), and every `config` key must be a Redis directive this guest
// knows or a file name ending in `.conf`.

import {
  type AdmissionResponse,
  allow,
  compareUtf8,
  deny,
  type JsonObject,
  Patch,
  pointerSegment,
  type Review,
} from "../../sdk-ts/src/index.ts";
import { convert, V1ALPHA1 } from "./conversion.ts";
import { parseSettings } from "./settings.ts";

/** The eviction policy a Cache gets when its config names none. */
export const DEFAULT_MAXMEMORY_POLICY = "allkeys-lru";

/** Redis configuration directives a `config` key may name (redis.conf of Redis 7). */
export const REDIS_DIRECTIVES = [
  "activedefrag",
  "active-defrag-cycle-max",
  "active-defrag-cycle-min",
  "active-defrag-ignore-bytes",
  "active-defrag-threshold-lower",
  "active-defrag-threshold-upper",
  "appendfilename",
  "appendfsync",
  "appendonly",
  "auto-aof-rewrite-min-size",
  "auto-aof-rewrite-percentage",
  "databases",
  "dir",
  "dbfilename",
  "hash-max-listpack-entries",
  "hash-max-listpack-value",
  "hz",
  "io-threads",
  "latency-monitor-threshold",
  "lazyfree-lazy-eviction",
  "lazyfree-lazy-expire",
  "lazyfree-lazy-server-del",
  "list-max-listpack-size",
  "loglevel",
  "lua-time-limit",
  "maxclients",
  "maxmemory",
  "maxmemory-policy",
  "maxmemory-samples",
  "min-replicas-max-lag",
  "min-replicas-to-write",
  "notify-keyspace-events",
  "protected-mode",
  "repl-backlog-size",
  "save",
  "set-max-intset-entries",
  "slowlog-log-slower-than",
  "slowlog-max-len",
  "stop-writes-on-bgsave-error",
  "tcp-backlog",
  "tcp-keepalive",
  "timeout",
  "zset-max-listpack-entries",
  "zset-max-listpack-value",
];

function isMap(value: unknown): value is JsonObject {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

/** The verdict on one request for a Cache in either version. */
export function admit(review: Review): AdmissionResponse {
  if (review.operation !== "create" && review.operation !== "update") {
    return allow();
  }
  const object = review.object;
  if (object === undefined) {
    return allow();
  }
  let settings;
  try {
    settings = parseSettings(review.settings);
  } catch (e) {
    return deny(e instanceof Error ? e.message : String(e));
  }
  const apiVersion = typeof object.apiVersion === "string" ? object.apiVersion : "";
  const slash = apiVersion.indexOf("/");
  if (slash < 0) {
    return deny("the Cache has no apiVersion");
  }
  const [group, version] = [apiVersion.slice(0, slash), apiVersion.slice(slash + 1)];
  // Read every version in the v1alpha1 shape; patch in the object's own.
  let alpha: JsonObject;
  try {
    alpha = convert(JSON.parse(JSON.stringify(object)) as JsonObject, `${group}/${V1ALPHA1}`);
  } catch (e) {
    return deny(e instanceof Error ? e.message : String(e));
  }
  const spec = isMap(alpha.spec) ? alpha.spec : {};
  const patch = new Patch();
  let image = typeof spec.image === "string" ? spec.image : "";
  if (image.trim() === "" && settings.defaultImage !== undefined) {
    image = settings.defaultImage;
    patch.add("/spec/image", settings.defaultImage);
  }
  const config = isMap(spec.config) ? spec.config : undefined;
  const keys = Object.keys(config ?? {}).sort(compareUtf8);
  if (!keys.some((k) => k === "maxmemory-policy" || k.endsWith(".conf"))) {
    const entry = { name: "maxmemory-policy", value: DEFAULT_MAXMEMORY_POLICY };
    if (version === V1ALPHA1) {
      if (config === undefined) {
        patch.add("/spec/config", { "maxmemory-policy": DEFAULT_MAXMEMORY_POLICY });
      } else {
        patch.add(`/spec/config/${pointerSegment("maxmemory-policy")}`, DEFAULT_MAXMEMORY_POLICY);
      }
    } else if (config === undefined) {
      patch.add("/spec/config", [entry]);
    } else {
      patch.add("/spec/config/-", entry);
    }
  }
  if (!isMap(object.spec)) {
    return deny("the Cache has no spec");
  }
  const bad = checkImage(image);
  if (bad !== undefined) {
    return deny(bad);
  }
  const unknown = keys.find((k) => !k.endsWith(".conf") && !REDIS_DIRECTIVES.includes(k));
  if (unknown !== undefined) {
    return deny(
      `spec.config key ${JSON.stringify(unknown)} is not a Redis directive this operator knows (nor a *.conf file)`,
    );
  }
  return review.mutating ? patch.allow() : allow();
}

/** Why `image` is refused: it must name a tag other than `latest`, or a digest. */
function checkImage(image: string): string | undefined {
  if (image.trim() === "") {
    return "spec.image must not be empty (this guest has no setting defaultImage)";
  }
  if (image.includes("@")) {
    return undefined;
  }
  const last = image.slice(image.lastIndexOf("/") + 1);
  const colon = last.indexOf(":");
  if (colon < 0) {
    return `spec.image ${JSON.stringify(image)} has no tag: name one (such as redis:7.2), not latest`;
  }
  const tag = last.slice(colon + 1);
  if (tag === "latest") {
    return `spec.image ${JSON.stringify(image)} uses the tag latest: name a fixed version`;
  }
  if (tag === "") {
    return `spec.image ${JSON.stringify(image)} has an empty tag`;
  }
  return undefined;
}
