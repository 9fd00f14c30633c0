"""A hostile sync hook for a Python hook server, as Metacontroller's
examples write one: it does what the parent's spec.attack says."""

import json
from http.server import BaseHTTPRequestHandler, HTTPServer


class Hostile(BaseHTTPRequestHandler):
    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers.get("content-length"))))
        parent = request["parent"]
        attack = parent["spec"]["attack"]
        if attack == "raise":
            raise RuntimeError("the Python hook gave up")
        if attack == "no-answer":
            return
        if attack == "status-500":
            self.send_response(500)
            self.end_headers()
            self.wfile.write(b"internal trouble in the Python hook")
            return
        if attack == "not-json":
            body = b"<html>not json</html>"
        elif attack == "spin":
            while True:
                pass
        else:
            body = json.dumps({"status": {"fine": True}, "children": []}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)


HTTPServer(("", 80), Hostile).serve_forever()
