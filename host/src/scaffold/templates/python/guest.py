"""The {{name}} guest: for every ``{{Kind}}`` a ConfigMap ``<name>-data``
holding ``spec.data``, and a ``Ready`` condition."""

from wasmop_sdk import (
    GuestError,
    Request,
    Response,
    conditions_of,
    describe,
    kind_ref,
    kinds,
    labels,
    object_meta,
    set_condition,
)


class Guest:
    """The {{name}} operator."""

    def describe(self, settings):
        return describe(kind_ref("{{group}}", "v1alpha1", "{{Kind}}"), [kinds.config_map])

    def reconcile(self, request: Request) -> Response:
        name = request.name
        if name == "":
            raise GuestError.permanent("the {{Kind}} has no metadata.name")
        spec = request.parent.get("spec") or {}
        data = {str(k): str(v) for k, v in (spec.get("data") or {}).items()}
        conditions = conditions_of(request.status)
        set_condition(
            conditions,
            "Ready",
            "True",
            "ConfigMapApplied",
            f"ConfigMap {name}-data holds spec.data",
            request.generation,
            request.now,
        )
        config_map = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": object_meta(f"{name}-data", labels({"app.kubernetes.io/name": "{{name}}"})),
            "data": data,
        }
        return Response().child(config_map).status({"phase": "Ready", "conditions": conditions})
