// Admission: what a guest implements to default and validate objects of its
// primary kind, as the Rust SDK's `Admission` (guests/sdk/src/admission.rs).
//
// The host calls `admit` twice per create or update: first with
// `review.mutating` true, where the answer's patch defaults the object, then
// with the defaulted object and `mutating` false, where only the verdict
// counts. Both calls must give the same verdict for the same object, and a
// patch must be idempotent (nothing left to default the second time).
//
// `Patch` refuses, as it is built, every path the host refuses in a patch
// (`apiVersion`, `kind`, `status`, `metadata` other than `labels` and
// `annotations`, keys under `wasmop.dev/`), so a guest's mistake names the
// path instead of failing the request at the host.

import type { AdmissionResponse, AdmissionReview, Operation } from "wasmop:operator/types@0.1.0";

export type { AdmissionResponse, AdmissionReview, Operation };

/** Keys under this prefix are the host's; a patch sets none. */
const HOST_PREFIX = "wasmop.dev/";

/** Defaulting and validation of the guest's primary kind. */
export interface Admission {
  /** The verdict on one request. */
  admit(review: Review): AdmissionResponse;
}

/** A JSON object, as admission reads it. */
type Json = { [key: string]: unknown };

function parse(text: string | undefined, what: string): Json | undefined {
  if (text === undefined) {
    return undefined;
  }
  const value: unknown = JSON.parse(text);
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new Error(`the ${what} is not a JSON object`);
  }
  return value as Json;
}

/** One admission request, its objects parsed once. */
export class Review {
  /** The request as the host sent it. */
  readonly wire: AdmissionReview;
  /** The object as it would be stored; `undefined` for a delete. */
  readonly object: Json | undefined;
  /** The object before the request (updates and deletes). */
  readonly oldObject: Json | undefined;
  /** The guest-list entry's settings, parsed; `undefined` when it has none. */
  readonly settings: unknown;

  constructor(wire: AdmissionReview) {
    this.wire = wire;
    this.object = parse(wire.object, "object");
    this.oldObject = parse(wire.oldObject, "old object");
    this.settings = wire.settings === undefined ? undefined : JSON.parse(wire.settings);
  }

  /** A request for `operation` of `object` (tests). */
  static of(operation: Operation, object: Json | undefined, mutating: boolean, settings?: unknown): Review {
    return new Review({
      operation,
      object: object === undefined ? undefined : JSON.stringify(object),
      oldObject: undefined,
      subResource: "",
      dryRun: false,
      username: "",
      groups: [],
      mutating,
      settings: settings === undefined ? undefined : JSON.stringify(settings),
    });
  }

  /** What the request does. */
  get operation(): Operation {
    return this.wire.operation;
  }

  /** True in the defaulting call, false in the validating one. */
  get mutating(): boolean {
    return this.wire.mutating;
  }

  /** The object as the guest's own type: a view of the same object. */
  objectAs<T>(): T | undefined {
    return this.object as T | undefined;
  }
}

/** Admits the request unchanged, with `warnings` shown to the user. */
export function allow(warnings: string[] = []): AdmissionResponse {
  return { allowed: true, message: "", code: undefined, patch: undefined, warnings };
}

/**
 * Denies the request with `message`, shown to the user; `code` is the HTTP
 * status (400–599, default 403).
 */
export function deny(message: string, code?: number): AdmissionResponse {
  if (code !== undefined && (!Number.isInteger(code) || code < 400 || code > 599)) {
    throw new Error(`a denial's code is an HTTP error status (400-599), not ${code}`);
  }
  return { allowed: false, message, code, patch: undefined, warnings: [] };
}

/** The RFC 6901 segment for `key`: `~` and `/` escaped. */
export function pointerSegment(key: string): string {
  return key.replace(/~/g, "~0").replace(/\//g, "~1");
}

/** The segments of an RFC 6901 pointer, unescaped. */
function segments(pointer: string): string[] {
  if (pointer !== "" && !pointer.startsWith("/")) {
    throw new Error(`${JSON.stringify(pointer)} is not a JSON pointer (it must start with /)`);
  }
  return pointer === "" ? [] : pointer.slice(1).split("/").map((s) => s.replace(/~1/g, "/").replace(/~0/g, "~"));
}

/**
 * Why the host would refuse a patch operation at `pointer` (setting `value`,
 * `undefined` for a removal), or `undefined` when it would not.
 */
export function refusedPath(pointer: string, value?: unknown): string | undefined {
  const [top, field, key] = segments(pointer);
  if (top === undefined) {
    return "the whole object";
  }
  if (top === "apiVersion" || top === "kind" || top === "status") {
    return top;
  }
  if (top !== "metadata") {
    return undefined;
  }
  if (field !== "labels" && field !== "annotations") {
    return field === undefined ? "metadata" : `metadata.${field}`;
  }
  if (key === undefined) {
    const hostKey =
      value !== null && typeof value === "object" ? Object.keys(value).find((k) => k.startsWith(HOST_PREFIX)) : undefined;
    if (value === undefined) {
      return `metadata.${field} as a whole (remove one key at a time)`;
    }
    return hostKey === undefined ? undefined : `metadata.${field}.${hostKey}`;
  }
  return key.startsWith(HOST_PREFIX) ? `metadata.${field}.${key}` : undefined;
}

/** One operation of a JSON Patch. */
export type PatchOperation =
  | { op: "add" | "replace"; path: string; value: unknown }
  | { op: "remove"; path: string };

/** A JSON Patch (RFC 6902) built one operation at a time. */
export class Patch {
  private readonly list: PatchOperation[] = [];

  /** Sets the member at `pointer` (its parent must exist) to `value`. */
  add(pointer: string, value: unknown): this {
    return this.push({ op: "add", path: pointer, value });
  }

  /** Replaces the existing member at `pointer` with `value`. */
  replace(pointer: string, value: unknown): this {
    return this.push({ op: "replace", path: pointer, value });
  }

  /** Removes the existing member at `pointer`. */
  remove(pointer: string): this {
    return this.push({ op: "remove", path: pointer });
  }

  private push(operation: PatchOperation): this {
    const refused = refusedPath(operation.path, operation.op === "remove" ? undefined : operation.value);
    if (refused !== undefined) {
      throw new Error(`an admission patch may not change ${refused} (path ${operation.path})`);
    }
    this.list.push(operation);
    return this;
  }

  /** Whether there is nothing to patch. */
  get isEmpty(): boolean {
    return this.list.length === 0;
  }

  /** The operations. */
  get operations(): readonly PatchOperation[] {
    return this.list;
  }

  /** Admits the request with this patch (none when empty). */
  allow(warnings: string[] = []): AdmissionResponse {
    return { ...allow(warnings), patch: this.isEmpty ? undefined : JSON.stringify(this.list) };
  }
}
