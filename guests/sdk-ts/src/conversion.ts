// Conversion: what a guest implements to convert its primary kind between
// versions, as the Rust SDK's `Conversion` (guests/sdk/src/admission.rs).
//
// The API server sends a ConversionReview whenever it reads or writes an
// object in a version other than the one it stores; the host hands the
// objects to `convert` one by one through `convertAll`. An answer must keep
// the object's kind and its metadata's identity (name, namespace, uid,
// resourceVersion, generation) and carry the desired `apiVersion`;
// `convertAll` refuses one that does not, with a message naming the field,
// before the host would.

/** A JSON object, as conversion reads it. */
type Json = { [key: string]: unknown };

/** Conversion of the guest's primary kind between its versions. */
export interface Conversion {
  /**
   * `object` in `desiredApiVersion` (e.g. "apps.example.com/v1beta1"), with
   * `apiVersion` set to it. Keep `kind` and `metadata` (only labels and
   * annotations may change). Throw to fail the API server's whole request
   * with the message.
   */
  convert(object: Json, desiredApiVersion: string): Json;
}

/** `[group, version]` of an `apiVersion` ("apps/v1"; "" for the core group's "v1"). */
export function splitApiVersion(apiVersion: string): [string, string] {
  const slash = apiVersion.indexOf("/");
  return slash < 0 ? ["", apiVersion] : [apiVersion.slice(0, slash), apiVersion.slice(slash + 1)];
}

/** The metadata fields a conversion must keep as they are. */
const IDENTITY = ["name", "namespace", "uid", "resourceVersion", "generation"];

function field(object: Json, ...path: string[]): unknown {
  let at: unknown = object;
  for (const key of path) {
    if (at === null || typeof at !== "object") {
      return undefined;
    }
    at = (at as Json)[key];
  }
  return at;
}

/**
 * Every object of one request (JSON text) through `conversion`, in order,
 * each answer checked against the object it came from.
 */
export function convertAll(conversion: Conversion, objects: string[], desiredApiVersion: string): string[] {
  return objects.map((text, i) => {
    let object: unknown;
    try {
      object = JSON.parse(text);
    } catch (e) {
      throw new Error(`object ${i} is not JSON: ${e instanceof Error ? e.message : String(e)}`);
    }
    if (object === null || typeof object !== "object" || Array.isArray(object)) {
      throw new Error(`object ${i} is not a JSON object`);
    }
    const original = object as Json;
    // The guest may change the object it is given: keep what it must keep first.
    const kind = original.kind;
    const identity = IDENTITY.map((key) => field(original, "metadata", key));
    const converted = conversion.convert(original, desiredApiVersion);
    if (converted.apiVersion !== desiredApiVersion) {
      throw new Error(`object ${i} was converted to apiVersion ${String(converted.apiVersion)}, not ${desiredApiVersion}`);
    }
    if (converted.kind !== kind) {
      throw new Error(`object ${i} changed its kind`);
    }
    IDENTITY.forEach((key, k) => {
      if (field(converted, "metadata", key) !== identity[k]) {
        throw new Error(`object ${i} changed metadata.${key}`);
      }
    });
    return JSON.stringify(converted);
  });
}
