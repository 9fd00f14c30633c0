// The {{name}} guest: for every `{{Kind}}` a ConfigMap `<name>-data` holding
// `spec.data`, and a `Ready` condition.

import {
  conditionsOf,
  DescriptionBuilder,
  GuestError,
  type JsonObject,
  kindRef,
  kinds,
  labels,
  type Operator,
  objectMeta,
  type Request,
  Response,
  setCondition,
} from "../sdk/index.ts";

function reconcile(request: Request): Response {
  const name = request.name;
  if (name === "") {
    throw GuestError.permanent("the {{Kind}} has no metadata.name");
  }
  const spec = (request.parent.spec ?? {}) as JsonObject;
  const data: { [key: string]: string } = {};
  for (const [key, value] of Object.entries((spec.data ?? {}) as JsonObject)) {
    data[key] = String(value);
  }
  const conditions = conditionsOf(request.status);
  setCondition(
    conditions,
    "Ready",
    "True",
    "ConfigMapApplied",
    `ConfigMap ${name}-data holds spec.data`,
    request.generation,
    request.now,
  );
  return new Response()
    .child({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: objectMeta(`${name}-data`, labels([["app.kubernetes.io/name", "{{name}}"]])),
      data,
    })
    .status({ phase: "Ready", conditions });
}

/** The {{name}} operator. */
export const Guest: Operator = {
  describe() {
    return new DescriptionBuilder(kindRef("{{group}}", "v1alpha1", "{{Kind}}")).child(kinds.configMap).build();
  },
  reconcile,
};
