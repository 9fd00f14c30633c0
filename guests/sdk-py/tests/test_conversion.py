import json

import pytest
from componentize_py_types import Err

from wasmop_sdk import convert_all, export_conversion, split_api_version

OBJECT = {
    "apiVersion": "example.com/v1",
    "kind": "Thing",
    "metadata": {"name": "a", "namespace": "n", "uid": "u", "labels": {"x": "1"}},
    "spec": {"size": 1},
}


class Renaming:
    def convert(self, obj, desired):
        return {**obj, "apiVersion": desired, "spec": {"bytes": obj["spec"]["size"]}}


def test_every_object_is_converted_in_order_and_keeps_its_identity():
    out = convert_all(Renaming(), [json.dumps(OBJECT), json.dumps({**OBJECT, "spec": {"size": 2}})], "example.com/v2")
    assert [json.loads(t)["spec"] for t in out] == [{"bytes": 1}, {"bytes": 2}]
    assert json.loads(out[0])["apiVersion"] == "example.com/v2"
    assert split_api_version("apps/v1") == ("apps", "v1")
    assert split_api_version("v1") == ("", "v1")


@pytest.mark.parametrize(
    "change,says",
    [
        (lambda o: {**o, "metadata": {**o["metadata"], "name": "b"}}, "metadata.name"),
        (lambda o: {**o, "metadata": {**o["metadata"], "uid": "v"}}, "metadata.uid"),
        (lambda o: {**o, "kind": "Other"}, "kind"),
    ],
)
def test_an_answer_that_breaks_what_the_host_checks_is_refused_naming_the_field(change, says):
    class Bad:
        def convert(self, obj, desired):
            return change({**obj, "apiVersion": desired})

    with pytest.raises(ValueError, match=says):
        convert_all(Bad(), [json.dumps(OBJECT)], "example.com/v2")


def test_an_answer_in_another_version_or_bad_json_is_refused():
    class Same:
        def convert(self, obj, desired):
            return obj

    with pytest.raises(ValueError, match="not example.com/v2"):
        convert_all(Same(), [json.dumps(OBJECT)], "example.com/v2")
    with pytest.raises(ValueError, match="object 0 is not JSON"):
        convert_all(Renaming(), ["{"], "example.com/v2")


def test_a_raised_conversion_error_is_the_wits_error_with_its_message():
    class Failing:
        def convert(self, obj, desired):
            raise ValueError("cannot convert to v9")

    with pytest.raises(Err) as raised:
        export_conversion(Failing())().convert([json.dumps(OBJECT)], "example.com/v9")
    assert raised.value.value == "cannot convert to v9"
