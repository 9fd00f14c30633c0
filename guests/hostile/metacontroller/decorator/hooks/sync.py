"""A hostile decorator's sync hook, in the form of Metacontroller's Python
examples: for the ConfigMap it is sent, what its annotation ``attack`` says.

"host-label" sets a label under wasmop.dev/, "bad-key" a label key that is
not one, "not-strings" a label value that is a number, "status" a status on
a kind without a status subresource, "none" the label ``decorated: "yes"``
(and removes the label ``remove-me``)."""

import json
from http.server import BaseHTTPRequestHandler, HTTPServer


def sync(target):
    attack = target["metadata"].get("annotations", {}).get("attack", "none")
    if attack == "host-label":
        return {"labels": {"wasmop.dev/guest": "someone-else"}}
    if attack == "bad-key":
        return {"labels": {"not a key!": "x"}}
    if attack == "not-strings":
        return {"labels": {"count": 3}}
    if attack == "status":
        return {"labels": {"decorated": "yes"}, "status": {"hacked": True}}
    return {"labels": {"decorated": "yes", "remove-me": None}}


class Controller(BaseHTTPRequestHandler):
    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers.get("content-length"))))
        body = json.dumps(sync(request["object"])).encode("utf-8")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)


HTTPServer(("", 80), Controller).serve_forever()
