import http.server
import json

import pytest
from componentize_py_types import Err

from wasmop_hooks import call, export_hooks, load

HOOK = '''
import json
from http.server import BaseHTTPRequestHandler, HTTPServer


class Controller(BaseHTTPRequestHandler):
    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers.get("content-length"))))
        attack = request.get("attack")
        if attack == "raise":
            raise ValueError("no parent")
        if attack == "silent":
            return
        status = 500 if attack == "refuse" else 200
        body = b"trouble" if attack == "refuse" else json.dumps({"saw": request, "path": self.path}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)


HTTPServer(("", 80), Controller).serve_forever()
'''


@pytest.fixture
def hook(tmp_path):
    path = tmp_path / "sync.py"
    path.write_text(HOOK)
    return str(path)


def test_a_hook_server_file_loads_without_serving_and_answers_through_the_standard_library(hook):
    served = http.server.HTTPServer
    handler = load("hook_under_test", hook)
    assert http.server.HTTPServer is served
    answer = json.loads(call(handler, "sync", json.dumps({"parent": {"a": 1}})))
    assert answer == {"saw": {"parent": {"a": 1}}, "path": "/sync"}


@pytest.mark.parametrize(
    "attack,says",
    [
        ("raise", "hook sync raised ValueError: no parent"),
        ("silent", "hook sync wrote no HTTP answer"),
        ("refuse", "hook sync answered status 500: trouble"),
    ],
)
def test_a_failing_hook_is_reported_in_its_own_words(hook, attack, says):
    handler = load("hook_under_test", hook)
    with pytest.raises(RuntimeError, match=says):
        call(handler, "sync", json.dumps({"attack": attack}))


def test_a_file_that_serves_nothing_is_refused(tmp_path):
    path = tmp_path / "plain.py"
    path.write_text("x = 1\n")
    with pytest.raises(ImportError, match="starts no HTTPServer"):
        load("plain", str(path))


def test_the_export_answers_the_definition_and_refuses_an_unknown_hook(hook):
    hooks = export_hooks('{"definition": {}}', {"sync": hook})()
    assert hooks.definition() == '{"definition": {}}'
    assert json.loads(hooks.call("sync", "{}"))["path"] == "/sync"
    with pytest.raises(Err):
        hooks.call("finalize", "{}")
