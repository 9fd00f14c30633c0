import json

import pytest

from wasmop_sdk import Patch, Review, allow, deny, export_admission, pointer_segment, refused_path


def test_a_patch_is_a_json_patch_and_none_when_empty():
    assert Patch().allow().patch is None
    response = Patch().add(f"/spec/{pointer_segment('a/b')}", 1).allow(["careful"])
    assert response.allowed and response.warnings == ["careful"]
    assert json.loads(response.patch) == [{"op": "add", "path": "/spec/a~1b", "value": 1}]
    assert pointer_segment("a/b~c") == "a~1b~0c"


@pytest.mark.parametrize(
    "pointer,says",
    [
        ("/apiVersion", "apiVersion"),
        ("/kind", "kind"),
        ("/status/phase", "status"),
        ("/metadata/name", "metadata.name"),
        ("/metadata/ownerReferences", "metadata.ownerReferences"),
        ("/metadata/labels/wasmop.dev~1guest", "metadata.labels.wasmop.dev/guest"),
        ("", "the whole object"),
    ],
)
def test_a_patch_refuses_every_path_the_host_refuses_naming_it(pointer, says):
    with pytest.raises(ValueError, match=f"may not change {says}"):
        Patch().add(pointer, "x")


def test_a_patch_allows_labels_annotations_and_spec():
    with pytest.raises(ValueError, match="wasmop.dev/x"):
        Patch().add("/metadata/labels", {"wasmop.dev/x": "1"})
    with pytest.raises(ValueError, match="as a whole"):
        Patch().remove("/metadata/annotations")
    with pytest.raises(ValueError, match="not a JSON pointer"):
        Patch().add("spec", 1)
    assert refused_path("/metadata/labels/team", "a") is None
    assert refused_path("/metadata/labels", {"team": "a"}) is None
    ops = Patch().add("/metadata/annotations/team", "a").replace("/spec/replicas", 2).remove("/spec/paused").operations
    assert [o["op"] for o in ops] == ["add", "replace", "remove"]


def test_a_denial_carries_its_message_and_an_http_error_code():
    assert not deny("no").allowed and deny("no").message == "no" and deny("no").code is None
    assert deny("no", 422).code == 422
    with pytest.raises(ValueError, match="400-599"):
        deny("no", 200)
    assert allow().allowed


def test_the_review_parses_its_objects_and_settings_once():
    review = Review.of("create", {"spec": {"x": 1}}, True, {"defaultImage": "redis:7.2"})
    assert review.object == {"spec": {"x": 1}} and review.old_object is None
    assert review.mutating and review.operation == "create"
    assert review.settings == {"defaultImage": "redis:7.2"}


def test_an_exception_in_admit_is_the_guests_failure_not_a_verdict():
    class Buggy:
        def admit(self, review):
            raise KeyError("spec")

    with pytest.raises(KeyError):
        export_admission(Buggy())().admit(Review.of("create", {}, True).wire)

    class Fine:
        def admit(self, review):
            return Patch().add("/spec/a", 1).allow() if review.mutating else allow()

    assert "/spec/a" in export_admission(Fine())().admit(Review.of("create", {"spec": {}}, True).wire).patch
