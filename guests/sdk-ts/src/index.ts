// The wasmop guest SDK for TypeScript: the WIT contract's types (generated
// from `wit/` into `generated/` by `build.mjs`) wrapped so that a guest is
// just its reconcile logic, with the same helpers as the Rust SDK
// (`guests/sdk`):
//
// - `Request`: the parent and the observed children and related objects
//   parsed once, looked up by kind and name;
// - `Response`: desired children, status, events, kept children, requeue
//   and the finalizer's answer, checked before they leave the guest;
// - `setCondition`: `metav1.Condition`s whose transition time changes only
//   when their status does, so a converged parent gets a byte-identical
//   status and the host writes nothing;
// - `objectMeta` and `labels`: metadata with a name and labels and nothing
//   the host stamps (namespace, ownerReferences, the `wasmop.dev/guest`
//   label);
// - `exportOperator`: the WIT exports, turning a thrown `GuestError` (or
//   anything else thrown) into the `reconcile-error` the host expects;
// - `exportAdmission` and `exportConversion` (with `Review`, `Patch`,
//   `allow`, `deny` of `admission.ts` and `convertAll` of `conversion.ts`):
//   defaulting, validation and conversion of the primary kind, served by
//   the host as webhooks;
// - `send` (`http.ts`): outbound HTTP through `wasi:http`, in a guest built
//   with `build.mjs component --http`.
//
// A guest has no clock, no randomness and no files: it is built with
// every WASI feature of componentize-js disabled and imports only the WIT's
// `log`, and with `--http` also `wasi:http` (and the `wasi:io` it uses).

import { log as hostLog } from "wasmop:operator/log@0.1.0";
import type {
  AdmissionResponse,
  AdmissionReview,
  ChildKind,
  Description,
  Event,
  KindRef,
  ObjectRef,
  ObservedObject,
  ReconcileRequest,
  ReconcileResponse,
  RelatedKind,
} from "wasmop:operator/types@0.1.0";

import { type Admission, Review } from "./admission.ts";
import { type Conversion, convertAll } from "./conversion.ts";

export {
  type Admission,
  allow,
  deny,
  Patch,
  type PatchOperation,
  pointerSegment,
  refusedPath,
  Review,
} from "./admission.ts";
export { type Conversion, convertAll, splitApiVersion } from "./conversion.ts";
export {
  bodyText,
  errorCodeName,
  failure,
  HttpError,
  type HttpErrorKind,
  type HttpResponse,
  httpAvailable,
  httpBuild,
  isSuccess,
  type Method,
  send,
  splitUrl,
} from "./http.ts";

export type {
  AdmissionResponse,
  AdmissionReview,
  ChildKind,
  Description,
  Event,
  KindRef,
  ObjectRef,
  ReconcileRequest,
  ReconcileResponse,
  RelatedKind,
};

/** Any JSON object. */
export type JsonObject = { [key: string]: unknown };

/** A Kubernetes object as JSON: `apiVersion`, `kind`, `metadata` and more. */
export interface KubeObject extends JsonObject {
  apiVersion?: string;
  kind?: string;
  metadata?: ObjectMeta;
}

/** The parts of `metav1.ObjectMeta` a guest reads or sets. */
export interface ObjectMeta extends JsonObject {
  name?: string;
  namespace?: string;
  uid?: string;
  generation?: number;
  labels?: { [key: string]: string };
  annotations?: { [key: string]: string };
  finalizers?: string[];
  deletionTimestamp?: string;
}

/** A `metav1.Condition`. */
export interface Condition {
  type: string;
  status: ConditionStatus;
  reason: string;
  message: string;
  observedGeneration?: number;
  lastTransitionTime: string;
}

/** The status of a condition. */
export type ConditionStatus = "True" | "False" | "Unknown";

/** Keys under this prefix are the host's; a guest sets none. */
export const HOST_PREFIX = "wasmop.dev/";

// ---------------------------------------------------------------- errors

/** Whether a failed reconcile is worth retrying. */
export type ErrorKind = "retryable" | "permanent";

/**
 * A reconcile failure the guest reports: `retryable` (the host retries with
 * backoff) or `permanent` (the host reports it and waits for a change).
 */
export class GuestError extends Error {
  readonly kind: ErrorKind;

  constructor(kind: ErrorKind, message: string) {
    super(message);
    this.kind = kind;
  }

  /** A transient failure. */
  static retryable(message: string): GuestError {
    return new GuestError("retryable", message);
  }

  /** Input that can never succeed as it is. */
  static permanent(message: string): GuestError {
    return new GuestError("permanent", message);
  }
}

// ---------------------------------------------------------------- logging

/** Log lines go to the host's log, tagged with the guest's name. */
export const log = {
  trace: (message: string): void => hostLog("trace", message),
  debug: (message: string): void => hostLog("debug", message),
  info: (message: string): void => hostLog("info", message),
  warn: (message: string): void => hostLog("warn", message),
  error: (message: string): void => hostLog("error", message),
};

// ---------------------------------------------------------------- time

/**
 * `seconds` since the Unix epoch as Kubernetes writes times:
 * `2024-05-01T12:00:00Z` (whole seconds, UTC).
 */
export function rfc3339(seconds: bigint | number): string {
  return new Date(Number(seconds) * 1000).toISOString().replace(/\.\d{3}Z$/, "Z");
}

// ---------------------------------------------------------------- kinds

/** A kind: `group` is "" for the core group. */
export function kindRef(group: string, version: string, kind: string): KindRef {
  return { group, version, kind };
}

/** The kind an `apiVersion` ("apps/v1", "v1") and `kind` name. */
export function kindOf(apiVersion: string, kind: string): KindRef {
  const slash = apiVersion.indexOf("/");
  return slash < 0
    ? { group: "", version: apiVersion, kind }
    : { group: apiVersion.slice(0, slash), version: apiVersion.slice(slash + 1), kind };
}

/** A namespaced child kind. */
export function childKind(kind: KindRef): ChildKind {
  return { kind, clusterScoped: false };
}

/** The well-known kinds guests most often own. */
export const kinds = {
  configMap: kindRef("", "v1", "ConfigMap"),
  secret: kindRef("", "v1", "Secret"),
  service: kindRef("", "v1", "Service"),
  deployment: kindRef("apps", "v1", "Deployment"),
  statefulSet: kindRef("apps", "v1", "StatefulSet"),
  podDisruptionBudget: kindRef("policy", "v1", "PodDisruptionBudget"),
};

/** `group/version`, or `version` for the core group. */
export function apiVersionOf(kind: KindRef): string {
  return kind.group === "" ? kind.version : `${kind.group}/${kind.version}`;
}

/**
 * What a guest manages: its primary kind, the kinds of its children, a
 * finalizer and related kinds. Chain `child`, `related` and `finalizer`.
 */
export class DescriptionBuilder {
  private readonly description: Description;

  constructor(primary: KindRef) {
    this.description = { primary, children: [], related: [] };
  }

  /** A kind the guest returns as children (namespaced). */
  child(kind: KindRef, clusterScoped = false): this {
    this.description.children.push({ kind, clusterScoped });
    return this;
  }

  /** A kind the guest reads: the object named at `pointer` in the parent. */
  relatedByName(kind: KindRef, pointer: string, metadataOnly = false): this {
    this.description.related.push({ kind, by: { tag: "name-at", val: pointer }, metadataOnly });
    return this;
  }

  /** A kind the guest reads: the objects the selector at `pointer` selects. */
  relatedBySelector(kind: KindRef, pointer: string, metadataOnly = false): this {
    this.description.related.push({ kind, by: { tag: "selector-at", val: pointer }, metadataOnly });
    return this;
  }

  /** A kind the guest reads: every object in the parent's namespace. */
  relatedInNamespace(kind: KindRef, metadataOnly = false): this {
    this.description.related.push({ kind, by: { tag: "namespace" }, metadataOnly });
    return this;
  }

  /** The finalizer the host adds to every parent. */
  finalizer(name: string): this {
    this.description.finalizer = name;
    return this;
  }

  /** The description. */
  build(): Description {
    return this.description;
  }
}

// ---------------------------------------------------------------- metadata

/** A label map from pairs, with its keys sorted. */
export function labels(pairs: [string, string][]): { [key: string]: string } {
  const sorted = [...pairs].sort(([a], [b]) => compareUtf8(a, b));
  const out: { [key: string]: string } = {};
  for (const [key, value] of sorted) {
    out[key] = value;
  }
  return out;
}

/**
 * Metadata with a name and labels and nothing the host stamps. Empty labels
 * are left out rather than written as `{}`.
 */
export function objectMeta(name: string, labelMap: { [key: string]: string } = {}): ObjectMeta {
  return Object.keys(labelMap).length === 0 ? { name } : { name, labels: labelMap };
}

// ---------------------------------------------------------------- request

/** An observed child or related object, parsed. */
export interface Observed {
  apiVersion: string;
  kind: string;
  name: string;
  object: KubeObject;
}

function parseObserved(wire: ObservedObject[]): Observed[] {
  return wire.map((o) => ({
    apiVersion: o.apiVersion,
    kind: o.kind,
    name: o.name,
    object: parseObject(o.object, `the observed ${o.kind} ${o.name}`),
  }));
}

function parseObject(text: string, what: string): KubeObject {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw GuestError.permanent(`${what} is not JSON: ${String(e)}`);
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw GuestError.permanent(`${what} is not a JSON object`);
  }
  return value as KubeObject;
}

/** What [`requestWire`] builds a request from, beside its parent. */
export interface RequestParts {
  /** The observed children, as objects. */
  observed?: JsonObject[];
  /** The related objects, as objects. */
  related?: JsonObject[];
  /** The parent is being deleted. */
  deleting?: boolean;
  /** The host's time in Unix seconds. */
  now?: bigint;
  /** The entry's settings as JSON text. */
  settings?: string;
}

function observedWire(object: JsonObject): ObservedObject {
  const text = (value: unknown) => (typeof value === "string" ? value : "");
  const metadata = object.metadata as { name?: unknown } | undefined;
  return {
    apiVersion: text(object.apiVersion),
    kind: text(object.kind),
    name: text(metadata?.name),
    object: JSON.stringify(object),
  };
}

/**
 * A reconcile request as the host sends it, built from objects: what a
 * guest's tests hand to its `reconcile`.
 */
export function requestWire(parent: JsonObject, parts: RequestParts = {}): ReconcileRequest {
  return {
    parent: JSON.stringify(parent),
    observed: (parts.observed ?? []).map(observedWire),
    deleting: parts.deleting ?? false,
    now: parts.now ?? 0n,
    settings: parts.settings,
    related: (parts.related ?? []).map(observedWire),
  };
}

/** One reconcile's input, parsed once. */
export class Request {
  /** The parent object. */
  readonly parent: KubeObject;
  /** The children the host observes for the parent. */
  readonly observed: Observed[];
  /** The related objects that map to the parent. */
  readonly related: Observed[];
  /** True once the parent is being deleted (guests with a finalizer). */
  readonly deleting: boolean;
  /** The host's time for this call, as `2024-05-01T12:00:00Z`. */
  readonly now: string;
  /** The guest-list entry's settings, parsed; `undefined` when it has none. */
  readonly settings: unknown;

  /** The request [`requestWire`] builds, parsed. */
  static of(parent: JsonObject, parts: RequestParts = {}): Request {
    return new Request(requestWire(parent, parts));
  }

  constructor(wire: ReconcileRequest) {
    this.parent = parseObject(wire.parent, "the parent");
    this.observed = parseObserved(wire.observed);
    this.related = parseObserved(wire.related);
    this.deleting = wire.deleting;
    this.now = rfc3339(wire.now);
    this.settings = wire.settings === undefined ? undefined : JSON.parse(wire.settings);
  }

  /** The parent's `metadata.name` ("" if it has none). */
  get name(): string {
    return this.parent.metadata?.name ?? "";
  }

  /** The parent's `metadata.generation`. */
  get generation(): number | undefined {
    return this.parent.metadata?.generation;
  }

  /** The parent's `.status`, if it has one. */
  get status(): JsonObject | undefined {
    const status = this.parent.status;
    return status !== null && typeof status === "object" && !Array.isArray(status)
      ? (status as JsonObject)
      : undefined;
  }

  /**
   * The parent as the guest's own type (`request.parentAs<Cache>()`): a
   * view of the same object, not a check of its shape.
   */
  parentAs<T extends KubeObject>(): T {
    return this.parent as T;
  }

  /** The observed child of `kind` named `name`, as `T` (default: any object). */
  observedNamed<T extends KubeObject = KubeObject>(kind: KindRef, name: string): T | undefined {
    return named(this.observed, kind, name) as T | undefined;
  }

  /** Every observed child of `kind`, as `T`. */
  observedOf<T extends KubeObject = KubeObject>(kind: KindRef): T[] {
    return of(this.observed, kind) as T[];
  }

  /** The related object of `kind` named `name`, as `T`. */
  relatedNamed<T extends KubeObject = KubeObject>(kind: KindRef, name: string): T | undefined {
    return named(this.related, kind, name) as T | undefined;
  }

  /** Every related object of `kind`, as `T`. */
  relatedOf<T extends KubeObject = KubeObject>(kind: KindRef): T[] {
    return of(this.related, kind) as T[];
  }

  /** References to every observed child. */
  observedRefs(): ObjectRef[] {
    return this.observed.map(({ apiVersion, kind, name }) => ({ apiVersion, kind, name }));
  }
}

function named(list: Observed[], kind: KindRef, name: string): KubeObject | undefined {
  const apiVersion = apiVersionOf(kind);
  return list.find((o) => o.apiVersion === apiVersion && o.kind === kind.kind && o.name === name)?.object;
}

function of(list: Observed[], kind: KindRef): KubeObject[] {
  const apiVersion = apiVersionOf(kind);
  return list.filter((o) => o.apiVersion === apiVersion && o.kind === kind.kind).map((o) => o.object);
}

// ---------------------------------------------------------------- response

/** One reconcile's answer, built up and checked before it is sent. */
export class Response {
  private readonly childTexts: string[] = [];
  private statusText: string | undefined;
  private requeue: number | undefined;
  private done = false;
  private readonly eventList: Event[] = [];
  private readonly kept: ObjectRef[] = [];

  /**
   * A desired child. It must carry `apiVersion`, `kind` and
   * `metadata.name`, and nothing only the host sets (ownerReferences,
   * `wasmop.dev/` labels and annotations); the host refuses the whole
   * answer otherwise, so the SDK refuses it first with a clearer message.
   */
  child(object: KubeObject): this {
    const what = `a child ${object.kind ?? "(no kind)"} ${object.metadata?.name ?? "(no name)"}`;
    if (typeof object.apiVersion !== "string" || typeof object.kind !== "string") {
      throw GuestError.permanent(`${what} has no apiVersion or kind`);
    }
    if (typeof object.metadata?.name !== "string" || object.metadata.name === "") {
      throw GuestError.permanent(`${what} has no metadata.name`);
    }
    if ("ownerReferences" in object.metadata) {
      throw GuestError.permanent(`${what} sets ownerReferences: the host sets the owner`);
    }
    for (const map of [object.metadata.labels, object.metadata.annotations]) {
      const key = Object.keys(map ?? {}).find((k) => k.startsWith(HOST_PREFIX));
      if (key !== undefined) {
        throw GuestError.permanent(`${what} sets ${key}: keys under ${HOST_PREFIX} are the host's`);
      }
    }
    this.childTexts.push(JSON.stringify(object));
    return this;
  }

  /** The desired `.status` of the parent (the host adds `observedGeneration`). */
  status(status: JsonObject): this {
    this.statusText = JSON.stringify(status);
    return this;
  }

  /** Be called again after `seconds` even if nothing changes. */
  requeueAfter(seconds: number): this {
    this.requeue = Math.max(0, Math.floor(seconds));
    return this;
  }

  /** Deletion path: cleanup is complete, the host may remove the finalizer. */
  finalize(): this {
    this.done = true;
    return this;
  }

  /** A Normal event on the parent. */
  normal(reason: string, message: string): this {
    this.eventList.push({ eventType: "normal", reason, message });
    return this;
  }

  /** A Warning event on the parent. */
  warning(reason: string, message: string): this {
    this.eventList.push({ eventType: "warning", reason, message });
    return this;
  }

  /** Leave the observed child `ref` exactly as it is (neither written nor pruned). */
  keep(ref: ObjectRef): this {
    this.kept.push(ref);
    return this;
  }

  /** Keep every observed child of `request` except those `except` names. */
  keepObserved(request: Request, except: (ref: ObjectRef) => boolean = () => false): this {
    for (const ref of request.observedRefs()) {
      if (!except(ref)) {
        this.kept.push(ref);
      }
    }
    return this;
  }

  /** The answer in the WIT's shape. */
  toWire(): ReconcileResponse {
    return {
      children: [...this.childTexts],
      status: this.statusText,
      requeueAfterSeconds: this.requeue,
      finalized: this.done,
      events: [...this.eventList],
      keep: [...this.kept],
    };
  }
}

// ---------------------------------------------------------------- conditions

/**
 * Sets the condition `type` in `conditions` (adding it if missing) and
 * returns whether anything changed. `lastTransitionTime` becomes `now` only
 * when the status changes or the condition is new; reason, message and
 * observedGeneration are always brought up to date.
 */
export function setCondition(
  conditions: Condition[],
  type: string,
  status: ConditionStatus,
  reason: string,
  message: string,
  observedGeneration: number | undefined,
  now: string,
): boolean {
  const existing = conditions.find((c) => c.type === type);
  if (existing === undefined) {
    const condition: Condition = { type, status, reason, message, lastTransitionTime: now };
    if (observedGeneration !== undefined) {
      condition.observedGeneration = observedGeneration;
    }
    conditions.push(condition);
    return true;
  }
  let changed = false;
  if (existing.status !== status) {
    existing.status = status;
    existing.lastTransitionTime = now;
    changed = true;
  }
  if (existing.reason !== reason) {
    existing.reason = reason;
    changed = true;
  }
  if (existing.message !== message) {
    existing.message = message;
    changed = true;
  }
  if (existing.observedGeneration !== observedGeneration) {
    if (observedGeneration === undefined) {
      delete existing.observedGeneration;
    } else {
      existing.observedGeneration = observedGeneration;
    }
    changed = true;
  }
  return changed;
}

/** The condition `type`, if present. */
export function findCondition(conditions: Condition[], type: string): Condition | undefined {
  return conditions.find((c) => c.type === type);
}

/** The conditions of a parent's status (a copy, to modify). */
export function conditionsOf(status: JsonObject | undefined): Condition[] {
  const list = status?.conditions;
  return Array.isArray(list) ? (structuredCopy(list) as Condition[]) : [];
}

function structuredCopy(value: unknown): unknown {
  return JSON.parse(JSON.stringify(value));
}

// ---------------------------------------------------------------- hashing

/** The UTF-8 bytes of `text` (lone surrogates as U+FFFD, as `TextEncoder`). */
export function utf8(text: string): number[] {
  const bytes: number[] = [];
  for (const char of text) {
    let code = char.codePointAt(0) ?? 0xfffd;
    if (code >= 0xd800 && code <= 0xdfff) {
      code = 0xfffd;
    }
    if (code < 0x80) {
      bytes.push(code);
    } else if (code < 0x800) {
      bytes.push(0xc0 | (code >> 6), 0x80 | (code & 0x3f));
    } else if (code < 0x10000) {
      bytes.push(0xe0 | (code >> 12), 0x80 | ((code >> 6) & 0x3f), 0x80 | (code & 0x3f));
    } else {
      bytes.push(
        0xf0 | (code >> 18),
        0x80 | ((code >> 12) & 0x3f),
        0x80 | ((code >> 6) & 0x3f),
        0x80 | (code & 0x3f),
      );
    }
  }
  return bytes;
}

/** Orders strings by their UTF-8 bytes (as Rust's `BTreeMap` and Go sort them). */
export function compareUtf8(a: string, b: string): number {
  const x = utf8(a);
  const y = utf8(b);
  const n = Math.min(x.length, y.length);
  for (let i = 0; i < n; i++) {
    if (x[i] !== y[i]) {
      return x[i] - y[i];
    }
  }
  return x.length - y.length;
}

/** `map` as compact JSON with its keys in UTF-8 byte order. */
export function canonicalJson(map: { [key: string]: string }): string {
  const keys = Object.keys(map).sort(compareUtf8);
  return `{${keys.map((k) => `${JSON.stringify(k)}:${JSON.stringify(map[k])}`).join(",")}}`;
}

/** The 64-bit FNV-1a hash of `text`'s UTF-8 bytes, as 16 hex digits. */
export function fnv1a64(text: string): string {
  let hash = 0xcbf29ce484222325n;
  for (const byte of utf8(text)) {
    hash ^= BigInt(byte);
    hash = (hash * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  return hash.toString(16).padStart(16, "0");
}

// ---------------------------------------------------------------- export

/** What a guest implements. */
export interface Operator {
  /** The kinds the guest manages, given its settings (`undefined`: none). */
  describe(settings: unknown): Description;
  /** The desired children and status for one parent. */
  reconcile(request: Request): Response;
}

function payloadOf(e: unknown): { kind: ErrorKind; message: string } {
  if (e instanceof GuestError) {
    return { kind: e.kind, message: e.message };
  }
  // A bug in the guest: retrying the same input fails the same way, but a
  // new module version may fix it, so it is retried with backoff.
  return { kind: "retryable", message: `the guest threw: ${e instanceof Error ? e.message : String(e)}` };
}

/**
 * The WIT exports for `operator`: `export const operator = exportOperator(...)`
 * in the guest's entry module.
 */
export function exportOperator(operator: Operator): {
  describe(settings: string | undefined): Description;
  reconcile(request: ReconcileRequest): ReconcileResponse;
} {
  return {
    describe(settings: string | undefined): Description {
      try {
        return operator.describe(settings === undefined ? undefined : JSON.parse(settings));
      } catch (e) {
        throw { payload: e instanceof Error ? e.message : String(e) };
      }
    },
    reconcile(request: ReconcileRequest): ReconcileResponse {
      try {
        return operator.reconcile(new Request(request)).toWire();
      } catch (e) {
        throw { payload: payloadOf(e) };
      }
    },
  };
}

function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/**
 * The WIT export for `admission`: `export const admission =
 * exportAdmission(...)` in the guest's entry module, which then targets the
 * world `admission-guest` (or `webhook-guest` with a conversion).
 *
 * Something thrown in `admit` is the guest's failure, not a verdict: its
 * message goes to the host's log at error level, which the host attaches to
 * the trap that follows, and the host answers as the guest-list entry's
 * `admissionFailurePolicy` says (denied under `Fail`), as it does for a
 * Rust guest's panic.
 */
export function exportAdmission(admission: Admission): { admit(review: AdmissionReview): AdmissionResponse } {
  return {
    admit(review: AdmissionReview): AdmissionResponse {
      try {
        return admission.admit(new Review(review));
      } catch (e) {
        hostLog("error", `admit threw: ${messageOf(e)}`);
        throw e;
      }
    },
  };
}

/**
 * The WIT export for `conversion`: `export const conversion =
 * exportConversion(...)` in the guest's entry module, which then targets
 * the world `conversion-guest` (or `webhook-guest` with an admission).
 * Something thrown fails the API server's whole request with its message.
 */
export function exportConversion(conversion: Conversion): {
  convert(objects: string[], desiredApiVersion: string): string[];
} {
  return {
    convert(objects: string[], desiredApiVersion: string): string[] {
      try {
        return convertAll(conversion, objects, desiredApiVersion);
      } catch (e) {
        throw { payload: messageOf(e) };
      }
    },
  };
}
