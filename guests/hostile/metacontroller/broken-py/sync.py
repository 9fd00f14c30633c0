"""A hook file that fails while it loads: the build refuses it."""

import json
from http.server import BaseHTTPRequestHandler, HTTPServer

SETTINGS = json.loads("{not json")


class Controller(BaseHTTPRequestHandler):
    def do_POST(self):
        pass


HTTPServer(("", 80), Controller).serve_forever()
