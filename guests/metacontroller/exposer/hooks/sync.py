"""The exposer's sync hook, as Metacontroller's Python examples write one:
an http.server request handler that reads the JSON request and writes the
JSON answer. For the Deployment it is sent (`object`), it attaches a
Service of the same name selecting the Deployment's Pods, on the port of
its annotation `mc.example.com/port` (80 without), and sets a label and an
annotation on the Deployment."""

import json
from http.server import BaseHTTPRequestHandler, HTTPServer


def sync(deployment, attachments):
    meta = deployment["metadata"]
    port = int(meta.get("annotations", {}).get("mc.example.com/port", "80"))
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
        "spec": {
            "selector": deployment["spec"]["selector"]["matchLabels"],
            "ports": [{"name": "http", "port": port, "targetPort": port}],
        },
    }
    return {
        "labels": {"mc.example.com/exposed": "true"},
        "annotations": {"mc.example.com/service": meta["name"]},
        "attachments": [service],
    }


class Controller(BaseHTTPRequestHandler):
    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers.get("content-length"))))
        answer = sync(request["object"], request["attachments"])
        body = json.dumps(answer).encode("utf-8")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


HTTPServer(("", 80), Controller).serve_forever()
