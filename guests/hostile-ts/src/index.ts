// A test guest whose `admit` and `convert` misbehave as the object's
// `spec.attack` says, answering in the WIT's own shapes so that none of the
// SDK's checks (`Patch`, `convertAll`) stands between it and the host: the
// tests show the host refuses its answers exactly as it refuses the Rust
// hostile guest's (guests/hostile/src/webhooks.rs, same attack names).
//
// | attack | `admit` | `convert` |
// |---|---|---|
// | `admit-rename`, `admit-owner`, `admit-finalizer`, `admit-host-label`, `admit-status`, `admit-kind` | patches that part of the object | |
// | `admit-bad-patch` | a patch that is not a JSON Patch | |
// | `admit-bad-code` | denies with code 200 | |
// | `admit-warnings` | admits with 1000 warnings | |
// | `admit-deny` | denies with "hostile says no" and code 422 | |
// | `admit-throw` | throws (the guest's failure: a trap) | |
// | `convert-rename` | | renames the object |
// | `convert-drop` | | answers no objects |
// | `convert-stale` | | leaves the apiVersion as it was |
// | `convert-host-label` | | labels the object `wasmop.dev/guest: someone-else` |
// | `convert-host-condition` | | forges the host's `GuestReconciled` condition |
//
// Anything else: `admit` admits unchanged, `convert` sets the apiVersion.

import { exportAdmission, exportOperator, type JsonObject, kindRef, Response } from "../../sdk-ts/src/index.ts";
import type { AdmissionResponse, AdmissionReview } from "../../sdk-ts/src/index.ts";

function attackOf(object: JsonObject | undefined): string {
  const spec = object?.spec as JsonObject | undefined;
  return typeof spec?.attack === "string" ? spec.attack : "none";
}

const allowed: AdmissionResponse = { allowed: true, message: "", code: undefined, patch: undefined, warnings: [] };

function patched(ops: unknown): AdmissionResponse {
  return { ...allowed, patch: JSON.stringify(ops) };
}

export const operator = exportOperator({
  describe: () => ({ primary: kindRef("test.wasmop.dev", "v1alpha1", "Hostile"), children: [], related: [] }),
  reconcile: () => new Response(),
});

/** The hostile `admit`, in the WIT's shapes. */
function admit(review: AdmissionReview): AdmissionResponse {
  const object = review.object === undefined ? undefined : (JSON.parse(review.object) as JsonObject);
  switch (attackOf(object)) {
    case "admit-deny":
      return { ...allowed, allowed: false, message: "hostile says no", code: 422 };
    case "admit-bad-code":
      return { ...allowed, allowed: false, message: "a denial that claims success", code: 200 };
    case "admit-warnings":
      return { ...allowed, warnings: Array.from({ length: 1000 }, () => "w") };
    case "admit-rename":
      return patched([{ op: "replace", path: "/metadata/name", value: "renamed" }]);
    case "admit-owner":
      return patched([
        {
          op: "add",
          path: "/metadata/ownerReferences",
          value: [
            {
              apiVersion: "v1",
              kind: "Namespace",
              name: "kube-system",
              uid: "00000000-0000-0000-0000-000000000000",
              controller: true,
            },
          ],
        },
      ]);
    case "admit-finalizer":
      return patched([{ op: "add", path: "/metadata/finalizers", value: ["hostile.example.com/never"] }]);
    case "admit-host-label":
      return patched([{ op: "add", path: "/metadata/labels", value: { "wasmop.dev/guest": "someone-else" } }]);
    case "admit-status":
      return patched([{ op: "add", path: "/status", value: { ok: true } }]);
    case "admit-kind":
      return patched([{ op: "replace", path: "/kind", value: "Secret" }]);
    case "admit-bad-patch":
      return { ...allowed, patch: '{"op": "nonsense"}' };
    case "admit-throw":
      throw new Error("hostile threw in admit");
    default:
      return allowed;
  }
}

/** The hostile `convert`, in the WIT's shapes. */
function convert(objects: string[], desiredApiVersion: string): string[] {
  const values = objects.map((text) => JSON.parse(text) as JsonObject);
  if (values.some((o) => attackOf(o) === "convert-drop")) {
    return [];
  }
  return values.map((object) => {
    const attack = attackOf(object);
    if (attack !== "convert-stale") {
      object.apiVersion = desiredApiVersion;
    }
    const metadata = (object.metadata ?? {}) as JsonObject;
    if (attack === "convert-rename") {
      metadata.name = "renamed";
    } else if (attack === "convert-host-label") {
      metadata.labels = { "wasmop.dev/guest": "someone-else" };
    } else if (attack === "convert-host-condition") {
      object.status = {
        conditions: [
          {
            type: "GuestReconciled",
            status: "True",
            reason: "Forged",
            message: "",
            lastTransitionTime: "2024-01-01T00:00:00Z",
          },
        ],
      };
    }
    object.metadata = metadata;
    return JSON.stringify(object);
  });
}

// `admit` goes through the SDK's export only for its error reporting; its
// answer is the raw one above.
export const admission = exportAdmission({ admit: (review) => admit(review.wire) });
export const conversion = { convert };
