"""The PetSet's sync and finalize hook in Python, as Metacontroller's
Python examples write a hook: the same logic as ``hooks/sync.js``, for a
user who writes Python (and for the bench that compares the two). A PetSet
keeps ``spec.replicas`` Pods named <name>-0, <name>-1, ...: it creates them in
order, each once the ones before it are Ready; while the PetSet is being
deleted it removes them from the highest ordinal down and says
``finalized`` once none is left."""

import copy
import json
from http.server import BaseHTTPRequestHandler, HTTPServer


def ready(pod):
    conditions = pod.get("status", {}).get("conditions", [])
    return "deletionTimestamp" not in pod["metadata"] and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in conditions
    )


def pod_for(petset, ordinal):
    template = petset["spec"].get("template", {})
    labels = dict(template.get("metadata", {}).get("labels", {}))
    labels["mc.example.com/petset"] = petset["metadata"]["name"]
    labels["mc.example.com/ordinal"] = str(ordinal)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{petset['metadata']['name']}-{ordinal}", "labels": labels},
        "spec": copy.deepcopy(template.get("spec", {})),
    }


def sync(request):
    petset = request["parent"]
    name = petset["metadata"]["name"]
    observed = request["children"].get("Pod.v1", {})
    pods = list(observed.values())
    status = {"replicas": len(pods), "readyReplicas": sum(1 for p in pods if ready(p))}
    if request.get("finalizing"):
        ordinals = sorted(
            int(p["metadata"]["name"][len(name) + 1:])
            for p in pods
            if p["metadata"]["name"][len(name) + 1:].isdigit()
        )
        children = [pod_for(petset, n) for n in ordinals[:-1]]
        return {"status": status, "children": children, "finalized": not pods}
    replicas = petset["spec"].get("replicas", 1)
    children = []
    previous_ready = True
    creating = False
    for ordinal in range(replicas):
        pod = observed.get(f"{name}-{ordinal}")
        if pod is not None:
            children.append(pod_for(petset, ordinal))
        elif previous_ready and not creating:
            children.append(pod_for(petset, ordinal))
            creating = True
        previous_ready = previous_ready and pod is not None and ready(pod)
    return {"status": status, "children": children}


class Controller(BaseHTTPRequestHandler):
    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers.get("content-length"))))
        body = json.dumps(sync(request)).encode("utf-8")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)


HTTPServer(("", 80), Controller).serve_forever()
