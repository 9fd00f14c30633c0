// `spec.auth.secretRef`: the Secret key holding the cache server's password,
// read from the request's related Secrets (the Rust guest's `auth.rs`).
//
// The guest declares Secrets as a related kind named at
// `SECRET_NAME_POINTER`, so the host hands it the Secret the Cache names and
// reconciles the Cache when that Secret appears, changes or goes. The
// password reaches the pods through `valueFrom.secretKeyRef`; the guest only
// needs to know that the key exists and a hash of its value (with the host's
// default it receives the value's SHA-256, not the value).

import { fnv1a64, type JsonObject, kinds, type Request } from "../../sdk-ts/src/index.ts";

/** Where a Cache names its Secret (the related kind's JSON pointer). */
export const SECRET_NAME_POINTER = "/spec/auth/secretRef/name";
/** The pod-template annotation holding the hash of the password's value. */
export const SECRET_HASH_ANNOTATION = "apps.example.com/secret-hash";
/** The environment variable the pods get the password in. */
export const PASSWORD_ENV = "CACHE_PASSWORD";

/** `spec.auth.secretRef`. */
export interface SecretRef {
  name: string;
  key: string;
}

/** The password a Cache's pods get. */
export type Password =
  | { kind: "none" }
  | { kind: "found"; name: string; key: string; hash: string }
  | { kind: "missing"; message: string };

/** `spec.auth.secretRef` of a v1alpha1 spec, if `spec.auth` is given. */
export function secretRefOf(spec: JsonObject): SecretRef | undefined {
  const auth = spec.auth;
  if (auth === null || typeof auth !== "object" || Array.isArray(auth)) {
    return undefined;
  }
  const ref = (auth as JsonObject).secretRef;
  const fields = ref !== null && typeof ref === "object" ? (ref as JsonObject) : {};
  return {
    name: typeof fields.name === "string" ? fields.name : "",
    key: typeof fields.key === "string" ? fields.key : "",
  };
}

/** The password `ref` asks for, looked up among `request`'s related Secrets. */
export function password(request: Request, ref: SecretRef | undefined): Password {
  if (ref === undefined) {
    return { kind: "none" };
  }
  const secret = request.relatedNamed(kinds.secret, ref.name);
  if (secret === undefined) {
    return {
      kind: "missing",
      message: `Secret ${ref.name} (key ${ref.key}) does not exist in the Cache's namespace`,
    };
  }
  const data = secret.data;
  const value = data !== null && typeof data === "object" ? (data as JsonObject)[ref.key] : undefined;
  if (typeof value !== "string") {
    return { kind: "missing", message: `Secret ${ref.name} has no key ${ref.key}` };
  }
  return { kind: "found", name: ref.name, key: ref.key, hash: fnv1a64(value) };
}
