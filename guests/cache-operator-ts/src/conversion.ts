// `Cache` in its two versions, and the conversion between them (the Rust
// guest's `conversion.rs`).
//
// `v1alpha1` (the seeds' shape): `spec.port`, and `spec.config` as a map of
// names to values. `v1beta1`: `spec.ports.client`, and `spec.config` as a
// list of `{name, value}` sorted by name. Everything else (metadata, status
// with `lastGoodImage` and `failedImage`, the other spec fields such as
// `upgrade`, fields this guest does not know) is carried as it is, so a
// round trip through the other version gives back the same object.

import { compareUtf8, type JsonObject } from "../../sdk-ts/src/index.ts";

/** The first version, the one the seeds define. */
export const V1ALPHA1 = "v1alpha1";
/** The second version, with `spec.ports` and `spec.config` as a list. */
export const V1BETA1 = "v1beta1";

function isMap(value: unknown): value is JsonObject {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

/**
 * `object` (a Cache in either version) in `desiredApiVersion`
 * (`<group>/v1alpha1` or `<group>/v1beta1`). Throws an `Error` for an
 * unknown version, an object of another group, or a spec whose shape does
 * not fit the version it claims.
 */
export function convert(object: JsonObject, desiredApiVersion: string): JsonObject {
  const slash = desiredApiVersion.indexOf("/");
  if (slash < 0) {
    throw new Error(`${JSON.stringify(desiredApiVersion)} is not <group>/<version>`);
  }
  const [group, desired] = [desiredApiVersion.slice(0, slash), desiredApiVersion.slice(slash + 1)];
  const apiVersion = object.apiVersion;
  const at = typeof apiVersion === "string" ? apiVersion.indexOf("/") : -1;
  if (typeof apiVersion !== "string" || at < 0) {
    throw new Error("the object has no apiVersion <group>/<version>");
  }
  const [currentGroup, current] = [apiVersion.slice(0, at), apiVersion.slice(at + 1)];
  if (currentGroup !== group) {
    throw new Error(`cannot convert a Cache of group ${currentGroup} to group ${group}`);
  }
  const spec = isMap(object.spec) ? object.spec : undefined;
  if (current === V1ALPHA1 && desired === V1BETA1) {
    if (spec !== undefined) up(spec);
  } else if (current === V1BETA1 && desired === V1ALPHA1) {
    if (spec !== undefined) down(spec);
  } else if (!(current === desired && (current === V1ALPHA1 || current === V1BETA1))) {
    throw new Error(`cannot convert a Cache from ${current} to ${desired}`);
  }
  object.apiVersion = desiredApiVersion;
  return object;
}

/** The v1alpha1 spec as v1beta1, in place. */
function up(spec: JsonObject): void {
  if ("port" in spec) {
    const port = spec.port;
    delete spec.port;
    spec.ports = { client: port };
  }
  if ("config" in spec) {
    const config = spec.config;
    delete spec.config;
    if (!isMap(config)) {
      throw new Error("v1alpha1 spec.config must be a map");
    }
    spec.config = Object.keys(config)
      .sort(compareUtf8)
      .map((name) => ({ name, value: config[name] }));
  }
}

/** The v1beta1 spec as v1alpha1, in place. */
function down(spec: JsonObject): void {
  if ("ports" in spec) {
    const ports = spec.ports;
    delete spec.ports;
    if (!isMap(ports)) {
      throw new Error("v1beta1 spec.ports must be an object");
    }
    const rest = { ...ports };
    if ("client" in rest) {
      spec.port = rest.client;
      delete rest.client;
    }
    const other = Object.keys(rest).sort(compareUtf8)[0];
    if (other !== undefined) {
      throw new Error(`v1beta1 spec.ports.${other} has no v1alpha1 equivalent`);
    }
  }
  if ("config" in spec) {
    const list = spec.config;
    delete spec.config;
    if (!Array.isArray(list)) {
      throw new Error("v1beta1 spec.config must be a list");
    }
    const map = new Map<string, unknown>();
    for (const entry of list) {
      const name = isMap(entry) ? entry.name : undefined;
      if (typeof name !== "string") {
        throw new Error("every v1beta1 spec.config entry needs a name");
      }
      if (map.has(name)) {
        throw new Error(`v1beta1 spec.config names ${JSON.stringify(name)} twice`);
      }
      map.set(name, isMap(entry) && "value" in entry ? entry.value : "");
    }
    spec.config = Object.fromEntries(map);
  }
}
