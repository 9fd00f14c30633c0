"""A ConfigPropagation's hooks, as Metacontroller's Python examples write
them: one http.server request handler serving /sync and /customize.

/customize names the related object the sync hook needs: the source
ConfigMap, in its own namespace. /sync copies its data into a ConfigMap of
the same name in each target namespace (each child names its namespace: the
parent is cluster-scoped); without a source there are no copies. The status
counts the copies and those whose data is the source's."""

import json
from http.server import BaseHTTPRequestHandler, HTTPServer


def customize(parent):
    spec = parent["spec"]
    return {
        "relatedResources": [
            {
                "apiVersion": "v1",
                "resource": "configmaps",
                "namespace": spec["sourceNamespace"],
                "names": [spec["sourceName"]],
            }
        ]
    }


def sync(parent, children, related):
    spec = parent["spec"]
    source_key = f"{spec['sourceNamespace']}/{spec['sourceName']}"
    source = related["ConfigMap.v1"].get(source_key)
    targets = spec.get("targetNamespaces", [])
    observed = children["ConfigMap.v1"]
    data = source.get("data", {}) if source else None
    in_sync = sum(1 for c in observed.values() if data is not None and c.get("data", {}) == data)
    status = {
        "expected": len(targets),
        "copies": len(observed),
        "inSync": in_sync,
        "source": "found" if source else "missing",
    }
    if source is None:
        return {"status": status, "children": []}
    copies = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": spec["sourceName"], "namespace": namespace},
            "data": data,
        }
        for namespace in targets
    ]
    return {"status": status, "children": copies}


class Controller(BaseHTTPRequestHandler):
    def answer(self, value, code=200):
        body = json.dumps(value).encode("utf-8")
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers.get("content-length"))))
        if self.path == "/customize":
            self.answer(customize(request["parent"]))
        elif self.path == "/sync":
            self.answer(sync(request["parent"], request["children"], request["related"]))
        else:
            self.answer({"error": f"no hook at {self.path}"}, 404)


HTTPServer(("", 80), Controller).serve_forever()
