import pytest

from wasmop_sdk import http


def test_urls_split_into_scheme_authority_and_path():
    assert http.split_url("https://r.example.com:8443/caches/a/b?x=1") == ("https", "r.example.com:8443", "/caches/a/b?x=1")
    assert http.split_url("http://127.0.0.1:8089") == ("http", "127.0.0.1:8089", "/")
    for bad in ("ftp://x/", "http:///x", "nope"):
        with pytest.raises(http.HttpError) as raised:
            http.split_url(bad)
        assert raised.value.kind == "invalid_url"


def test_without_http_every_request_fails_as_unavailable_sending_nothing():
    assert not http.AVAILABLE
    with pytest.raises(http.HttpError) as raised:
        http.send("GET", "http://127.0.0.1/")
    assert raised.value.kind == "unavailable"
    assert str(raised.value).startswith("outbound HTTP is unavailable")


def test_errors_are_worded_as_the_rust_sdk_words_them():
    assert str(http.HttpError("refused", "ErrorCode::HttpRequestDenied")) == "refused by the host: ErrorCode::HttpRequestDenied"
    assert str(http.HttpError("failed", "ErrorCode::ConnectionRefused")) == "request failed: ErrorCode::ConnectionRefused"
    assert http.HttpResponse(204).is_success() and not http.HttpResponse(404).is_success()
    assert http.HttpResponse(200, [("content-type", b"text/plain")]).header("content-type") == "text/plain"
