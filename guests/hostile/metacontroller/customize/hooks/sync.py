"""A hostile customize and sync hook pair, in the form of Metacontroller's
Python examples: what ``spec.attack`` says, in ``spec.namespace``.

/customize: "too-many-rules" names 17 related resources, "host-namespace"
relates the ConfigMaps of ``spec.namespace`` (the test gives the host's
own), "unknown-resource" a resource nobody serves, "names-and-selector" both
at once, "customize-raises" raises, "secrets" relates the Secrets of
``spec.namespace`` (the test's host names Secret a privileged kind),
"roles" its Roles (a kind that grants power, not named), "none" the
ConfigMaps there.
/sync: "no-namespace" answers a namespaced child without a namespace;
otherwise it reports what it was related: the ConfigMaps' names and whether
any Secret's value reached it unconcealed."""

import json
from http.server import BaseHTTPRequestHandler, HTTPServer


def customize(parent):
    attack = parent["spec"].get("attack", "none")
    ns = parent["spec"].get("namespace", "default")
    if attack == "customize-raises":
        raise RuntimeError("the customize hook gave up")
    if attack == "too-many-rules":
        return {"relatedResources": [{"apiVersion": "v1", "resource": "configmaps", "namespace": f"ns-{i}"} for i in range(17)]}
    if attack == "unknown-resource":
        return {"relatedResources": [{"apiVersion": "v1", "resource": "widgets"}]}
    if attack == "names-and-selector":
        return {"relatedResources": [{"apiVersion": "v1", "resource": "configmaps", "names": ["a"], "labelSelector": {}}]}
    if attack == "secrets":
        return {"relatedResources": [{"apiVersion": "v1", "resource": "secrets", "namespace": ns}]}
    if attack == "roles":
        return {"relatedResources": [{"apiVersion": "rbac.authorization.k8s.io/v1", "resource": "roles", "namespace": ns}]}
    return {"relatedResources": [{"apiVersion": "v1", "resource": "configmaps", "namespace": ns}]}


def sync(parent, related):
    attack = parent["spec"].get("attack", "none")
    if attack == "no-namespace":
        return {"children": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "nowhere"}}]}
    secrets = related.get("Secret.v1", {})
    plain = [
        key
        for key, secret in secrets.items()
        for value in (secret.get("data") or {}).values()
        if value == "aHVudGVyMg=="
    ]
    return {
        "status": {
            "configMaps": sorted(related.get("ConfigMap.v1", {}).keys()),
            "secrets": len(secrets),
            "unconcealed": plain,
        },
        "children": [],
    }


class Controller(BaseHTTPRequestHandler):
    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers.get("content-length"))))
        if self.path == "/customize":
            answer = customize(request["parent"])
        else:
            answer = sync(request["parent"], request["related"])
        body = json.dumps(answer).encode("utf-8")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)


HTTPServer(("", 80), Controller).serve_forever()
