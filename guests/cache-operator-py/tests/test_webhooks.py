# Admission, conversion and the password Secret are in the shared cases
# (guests/cases/cache-operator), which every language's guest passes.
from registry import REGISTRATION_REFUSED, Registry

NOW = "2024-05-01T12:00:00Z"


def test_a_registration_that_cannot_be_sent_is_refused_and_backs_off():
    registry = Registry("http://r.example.com:8089/", "c1", "team", 6380, 2)
    assert registry.url == "http://r.example.com:8089/caches/team/c1"
    assert registry.address() == "c1.team.svc:6380"
    status = {"conditions": []}
    event, wait = registry.register(status, NOW)
    assert event[1] == REGISTRATION_REFUSED and wait == 2
    event, wait = registry.register(status, "2024-05-01T12:00:40Z")
    assert event is None and wait == 40
    assert registry.deregister(None, NOW) == ("not-registered",)
    assert registry.deregister(status, NOW) == ("not-registered",)
