"""A Fanout's sync hook, as Metacontroller's Python examples write one: an
http.server request handler that reads the JSON request and writes the JSON
answer. A Fanout keeps ``spec.copies`` ConfigMaps named <name>-0, <name>-1,
... holding ``spec.data``; more than 10 copies is refused with an error,
which fails the sync."""

import json
from http.server import BaseHTTPRequestHandler, HTTPServer

MAX_COPIES = 10


def sync(parent, children):
    spec = parent.get("spec", {})
    copies = spec.get("copies", 1)
    data = spec.get("data", {})
    if copies > MAX_COPIES:
        raise ValueError(f"copies is {copies}: at most {MAX_COPIES} are allowed")
    name = parent["metadata"]["name"]
    observed = children["ConfigMap.v1"]
    in_sync = sum(1 for c in observed.values() if c.get("data", {}) == data)
    desired = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"{name}-{i}", "labels": {"mc.example.com/fanout": name}},
            "data": data,
        }
        for i in range(copies)
    ]
    return {"status": {"copies": len(observed), "inSync": in_sync}, "children": desired}


class Controller(BaseHTTPRequestHandler):
    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers.get("content-length"))))
        answer = sync(request["parent"], request["children"])
        body = json.dumps(answer).encode("utf-8")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


HTTPServer(("", 80), Controller).serve_forever()
