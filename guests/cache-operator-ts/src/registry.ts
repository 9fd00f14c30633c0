// Registering each Cache with an external registry, and removing it there
// before the finalizer goes (the Rust guest's `registry.rs`).
//
// With the setting `registryUrl` (and the host granting that origin in the
// guest's `allowedOutboundHosts`), a Ready Cache is registered once with
// `PUT {registryUrl}/caches/{namespace}/{name}` and body
// `{"namespace", "name", "address"}` (the Service's `name.namespace.svc:port`);
// the condition `Registered` records it. A failure that may have stored
// something (no answer, a timeout, a 5xx) is `RegistryUnavailable`; one that
// cannot have (a 4xx, the host refusing the request) is `RegistrationRefused`,
// unless the Cache was registered before under another address. Retries wait
// as long as the registry has been failing (2 s, 4 s, 8 s … at most 5 min),
// kept in the condition's transition time, so the guest stays stateless.
//
// On deletion a Cache that may be in the registry is removed with `DELETE`
// on the same URL before the answer is `finalized`, a 404 counting as
// removed; while that fails the Cache stays, with reason `CleanupBlocked`.

import {
  type Condition,
  type ConditionStatus,
  findCondition,
  HttpError,
  isSuccess,
  type JsonObject,
  send,
  setCondition,
} from "../../sdk-ts/src/index.ts";

/** Condition type: the Cache is in the registry. */
export const REGISTERED = "Registered";
/** Reason: the registry could not be reached or may have stored it. */
export const REGISTRY_UNAVAILABLE = "RegistryUnavailable";
/** Reason of `Registered=True` while deleting fails: the finalizer waits. */
export const CLEANUP_BLOCKED = "CleanupBlocked";
/** Reason of `Registered=False` once the Cache is out of the registry. */
export const DEREGISTERED = "Deregistered";
/** Reason: the registration cannot have been stored (4xx, refused by the host). */
export const REGISTRATION_REFUSED = "RegistrationRefused";

const MIN_RETRY_SECONDS = 2;
const MAX_RETRY_SECONDS = 300;

/** An Event: type, reason, message. */
export type RegistryEvent = ["normal" | "warning", string, string];

/** The registry of one Cache. */
export class Registry {
  readonly url: string;

  constructor(
    base: string,
    private readonly name: string,
    private readonly namespace: string,
    private readonly port: number,
    private readonly generation: number | undefined,
  ) {
    this.url = `${base.replace(/\/+$/, "")}/caches/${namespace}/${name}`;
  }

  /** Where clients reach the Cache: its Service. */
  address(): string {
    return `${this.name}.${this.namespace}.svc:${this.port}`;
  }

  private set(conditions: Condition[], state: ConditionStatus, reason: string, message: string, now: string): boolean {
    return setCondition(conditions, REGISTERED, state, reason, message, this.generation, now);
  }

  /**
   * Registers a Ready Cache unless `status` shows it registered at its
   * current address. Returns an Event for a change and, after a failure, the
   * seconds to wait before the next try.
   */
  register(status: JsonObject, now: string): [RegistryEvent | undefined, number | undefined] {
    const conditions = status.conditions as Condition[];
    const message = `registered as ${this.address()}`;
    const current = findCondition(conditions, REGISTERED);
    if (current?.status === "True" && current.message === message) {
      return [undefined, undefined];
    }
    const body = JSON.stringify({ namespace: this.namespace, name: this.name, address: this.address() });
    try {
      const response = send("PUT", this.url, body);
      if (isSuccess(response)) {
        this.set(conditions, "True", "Registered", message, now);
        return [["normal", "Registered", `${message} at ${this.url}`], undefined];
      }
      return this.unavailable(conditions, `the registry answered ${response.status}`, response.status < 500, now);
    } catch (e) {
      const error = e instanceof HttpError ? e : new HttpError("failed", String(e));
      return this.unavailable(conditions, error.toString(), error.kind !== "failed", now);
    }
  }

  private unavailable(
    conditions: Condition[],
    error: string,
    definite: boolean,
    now: string,
  ): [RegistryEvent | undefined, number] {
    const message = `registering at ${this.url} failed: ${error}`;
    const reason = definite && !mayBeRegistered(conditions) ? REGISTRATION_REFUSED : REGISTRY_UNAVAILABLE;
    const changed = this.set(conditions, "False", reason, message, now);
    return [changed ? ["warning", reason, message] : undefined, retryAfter(conditions, now)];
  }

  /**
   * Removes the Cache from the registry if it may be there. Returns
   * "notRegistered", or the status to report and, while deleting fails, an
   * Event and the seconds before the next try.
   */
  deregister(
    previous: JsonObject | undefined,
    now: string,
  ):
    | { kind: "notRegistered" }
    | { kind: "removed"; status: JsonObject }
    | { kind: "blocked"; status: JsonObject; event: RegistryEvent | undefined; retryAfter: number } {
    if (previous === undefined) {
      return { kind: "notRegistered" };
    }
    const status = statusFields(previous);
    const conditions = (Array.isArray(status.conditions) ? status.conditions : []) as Condition[];
    if (!mayBeRegistered(conditions)) {
      return { kind: "notRegistered" };
    }
    status.conditions = conditions;
    const registered = findCondition(conditions, REGISTERED)?.status === "True";
    let error: string;
    try {
      const response = send("DELETE", this.url);
      if (isSuccess(response) || response.status === 404) {
        this.set(conditions, "False", DEREGISTERED, `removed from ${this.url}`, now);
        return { kind: "removed", status };
      }
      error = `the registry answered ${response.status}`;
    } catch (e) {
      error = e instanceof HttpError ? e.toString() : String(e);
    }
    const message = `deleting ${this.url} failed: ${error}; the Cache stays until it succeeds`;
    const changed = this.set(conditions, registered ? "True" : "Unknown", CLEANUP_BLOCKED, message, now);
    return {
      kind: "blocked",
      status,
      event: changed ? ["warning", CLEANUP_BLOCKED, message] : undefined,
      retryAfter: retryAfter(conditions, now),
    };
  }
}

/**
 * The fields of a Cache's status the operator reports, as the Rust guest's
 * `CacheStatus` reads them: `readyReplicas` (0 when absent), `phase`,
 * `observedGeneration`, `lastGoodImage`, `failedImage` and `conditions`.
 */
function statusFields(previous: JsonObject): JsonObject {
  const copy = JSON.parse(JSON.stringify(previous)) as JsonObject;
  const status: JsonObject = { readyReplicas: typeof copy.readyReplicas === "number" ? copy.readyReplicas : 0 };
  for (const key of ["phase", "observedGeneration", "lastGoodImage", "failedImage"]) {
    if (copy[key] !== undefined && copy[key] !== null) {
      status[key] = copy[key];
    }
  }
  if (Array.isArray(copy.conditions) && copy.conditions.length > 0) {
    status.conditions = copy.conditions;
  }
  return status;
}

/**
 * Whether the Cache may be in the registry: registered, or a registration
 * that failed in a way that may have stored it, and no `DELETE` succeeded
 * since.
 */
function mayBeRegistered(conditions: Condition[]): boolean {
  const condition = findCondition(conditions, REGISTERED);
  return condition !== undefined && condition.reason !== DEREGISTERED && condition.reason !== REGISTRATION_REFUSED;
}

/** As long as `Registered` has been in its state, within 2 s and 5 min. */
function retryAfter(conditions: Condition[], now: string): number {
  const since = findCondition(conditions, REGISTERED)?.lastTransitionTime;
  const seconds = since === undefined ? 0 : Math.floor((Date.parse(now) - Date.parse(since)) / 1000);
  return Math.max(MIN_RETRY_SECONDS, Math.min(Math.max(seconds, 0), MAX_RETRY_SECONDS));
}
