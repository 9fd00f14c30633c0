import json

from guest import Guest
from wasmop_sdk import Request


def test_a_parent_gets_its_config_map_and_is_ready():
    request = Request.of(
        {
            "apiVersion": "{{group}}/v1alpha1",
            "kind": "{{Kind}}",
            "metadata": {"name": "sample", "generation": 1},
            "spec": {"data": {"greeting": "hello"}},
        },
        now=1_714_564_800,
    )
    response = Guest().reconcile(request).to_wire()
    config_map = json.loads(response.children[0])
    assert config_map["metadata"]["name"] == "sample-data"
    assert config_map["data"] == {"greeting": "hello"}
    assert json.loads(response.status)["conditions"][0]["status"] == "True"
