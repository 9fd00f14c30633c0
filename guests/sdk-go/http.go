package wasmop

import (
	"fmt"
	"strings"
)

// HTTPResponse is a response: its status, headers and body.
type HTTPResponse struct {
	// Status is the HTTP status code.
	Status int
	// Headers are the headers, names in lower case, in the order received.
	Headers []HTTPHeader
	// Body is the whole body.
	Body []byte
}

// HTTPHeader is one header of a response.
type HTTPHeader struct {
	// Name is the header's name, in lower case.
	Name string
	// Value is its value.
	Value []byte
}

// IsSuccess says whether the status is 2xx.
func (r *HTTPResponse) IsSuccess() bool { return r.Status >= 200 && r.Status < 300 }

// Header is the first value of the header name (lower case) as text.
func (r *HTTPResponse) Header(name string) (string, bool) {
	for _, h := range r.Headers {
		if h.Name == name {
			return string(h.Value), true
		}
	}
	return "", false
}

// HTTPErrorKind is why a request got no response.
type HTTPErrorKind uint8

const (
	// HTTPInvalidURL: the URL is not http(s)://host[:port][/path].
	HTTPInvalidURL HTTPErrorKind = iota
	// HTTPRefused: the host refused the request (not in
	// allowedOutboundHosts, or an address it does not allow).
	HTTPRefused
	// HTTPFailed: the request failed on the way (connection, TLS,
	// timeout, size).
	HTTPFailed
	// HTTPUnavailable: this build has no outbound HTTP (natively, or a
	// component built without `wasmop build --http`).
	HTTPUnavailable
)

// HTTPError is why a request got no response; its message is worded as
// the other SDKs word it.
type HTTPError struct {
	// Kind is why.
	Kind HTTPErrorKind
	// Detail is the URL, the host's reason or the failure.
	Detail string
}

// Error words the failure: `refused by the host: ErrorCode::HttpRequestDenied`, …
func (e *HTTPError) Error() string {
	switch e.Kind {
	case HTTPInvalidURL:
		return fmt.Sprintf("invalid URL %q", e.Detail)
	case HTTPRefused:
		return "refused by the host: " + e.Detail
	case HTTPFailed:
		return "request failed: " + e.Detail
	default:
		return "outbound HTTP is unavailable: " + e.Detail
	}
}

// SplitURL is the scheme ("https" or "http"), the authority and the path
// with query of url.
func SplitURL(url string) (scheme, authority, path string, err error) {
	scheme, rest, ok := strings.Cut(url, "://")
	if !ok || (scheme != "http" && scheme != "https") {
		return "", "", "", &HTTPError{Kind: HTTPInvalidURL, Detail: url}
	}
	authority, path = rest, "/"
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		authority, path = rest[:i], rest[i:]
	}
	if authority == "" {
		return "", "", "", &HTTPError{Kind: HTTPInvalidURL, Detail: url}
	}
	return scheme, authority, path, nil
}

// Sender sends one request; the bindings of a build with outbound HTTP
// install one over `wasi:http/outgoing-handler` ([SetSender]).
type Sender func(method, scheme, authority, path string, body []byte) (*HTTPResponse, error)

var sender Sender

// SetSender installs the sender [Send] uses. The bindings `wasmop build
// --http` generates call it; a guest has no use for it, except a test
// that stands in for a server.
func SetSender(s Sender) { sender = s }

// HTTPAvailable says whether [Send] can send (a build with outbound HTTP).
func HTTPAvailable() bool { return sender != nil }

// Send sends one request (method GET, PUT, POST or DELETE) with an
// optional body, sent as content-type application/json with its
// content-length, and reads the whole response.
//
// The host lets a request out only to what the guest-list entry's
// allowedOutboundHosts names (default: nothing), within the call's
// deadline, with at most 1 MiB of response body; redirects are returned,
// not followed. A refused request is an [HTTPError] of kind [HTTPRefused]
// here and a Warning Event on the parent. Natively, and in a build
// without --http, every request fails as [HTTPUnavailable], so logic that
// depends on a remote answer is tested on its failure path.
func Send(method, url string, body []byte) (*HTTPResponse, error) {
	scheme, authority, path, err := SplitURL(url)
	if err != nil {
		return nil, err
	}
	switch method {
	case "GET", "PUT", "POST", "DELETE":
	default:
		return nil, fmt.Errorf("method %q is not one of GET, PUT, POST, DELETE", method)
	}
	if sender == nil {
		return nil, &HTTPError{Kind: HTTPUnavailable, Detail: unavailable}
	}
	return sender(method, scheme, authority, path, body)
}
