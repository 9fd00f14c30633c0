// Written by `wasmop build --http` beside the bindings it generates; DO
// NOT EDIT. The sender the SDK's Send uses, over wasi:http's
// outgoing-handler: one request, its whole body, its whole response.

package wasmop_http

import (
	"strconv"
	"strings"

	witTypes "go.bytecodealliance.org/pkg/wit/types"
	wasmop "wasmop.dev/sdk"
	handler "wit_component/wasi_http_outgoing_handler"
	http "wit_component/wasi_http_types"
	streams "wit_component/wasi_io_streams"
)

func init() { wasmop.SetSender(send) }

// chunk is how much of the response body one read asks for.
const chunk = 64 << 10

// errorCodes names wasi:http's error codes as the Rust SDK prints them.
var errorCodes = [...]string{
	"DnsTimeout", "DnsError", "DestinationNotFound", "DestinationUnavailable",
	"DestinationIpProhibited", "DestinationIpUnroutable", "ConnectionRefused",
	"ConnectionTerminated", "ConnectionTimeout", "ConnectionReadTimeout",
	"ConnectionWriteTimeout", "ConnectionLimitReached", "TlsProtocolError",
	"TlsCertificateError", "TlsAlertReceived", "HttpRequestDenied",
	"HttpRequestLengthRequired", "HttpRequestBodySize", "HttpRequestMethodInvalid",
	"HttpRequestUriInvalid", "HttpRequestUriTooLong", "HttpRequestHeaderSectionSize",
	"HttpRequestHeaderSize", "HttpRequestTrailerSectionSize", "HttpRequestTrailerSize",
	"HttpResponseIncomplete", "HttpResponseHeaderSectionSize", "HttpResponseHeaderSize",
	"HttpResponseBodySize", "HttpResponseTrailerSectionSize", "HttpResponseTrailerSize",
	"HttpResponseTransferCoding", "HttpResponseContentCoding", "HttpResponseTimeout",
	"HttpUpgradeFailed", "HttpProtocolError", "LoopDetected", "ConfigurationError",
	"InternalError",
}

func failed(code http.ErrorCode) error {
	name := "ErrorCode::Unknown"
	if int(code.Tag()) < len(errorCodes) {
		name = "ErrorCode::" + errorCodes[code.Tag()]
	}
	kind := wasmop.HTTPFailed
	if code.Tag() == http.ErrorCode_HttpRequestDenied || code.Tag() == http.ErrorCode_DestinationIpProhibited {
		kind = wasmop.HTTPRefused
	}
	return &wasmop.HTTPError{Kind: kind, Detail: name}
}

func streamError(e streams.StreamError) string {
	if e.Tag() == streams.StreamError_Closed {
		return "StreamError::Closed"
	}
	return "StreamError::LastOperationFailed"
}

func send(method, scheme, authority, path string, body []byte) (*wasmop.HTTPResponse, error) {
	invalid := &wasmop.HTTPError{Kind: wasmop.HTTPInvalidURL, Detail: scheme + "://" + authority + path}
	headers := http.MakeFields()
	if body != nil {
		headers.Append("content-type", []byte("application/json"))
		headers.Append("content-length", []byte(strconv.Itoa(len(body))))
	}
	request := http.MakeOutgoingRequest(headers)
	methods := map[string]http.Method{
		"GET": http.MakeMethodGet(), "PUT": http.MakeMethodPut(),
		"POST": http.MakeMethodPost(), "DELETE": http.MakeMethodDelete(),
	}
	if request.SetMethod(methods[method]).IsErr() {
		return nil, invalid
	}
	schemeValue := http.MakeSchemeHttp()
	if scheme == "https" {
		schemeValue = http.MakeSchemeHttps()
	}
	if request.SetScheme(witTypes.Some(schemeValue)).IsErr() ||
		request.SetAuthority(witTypes.Some(authority)).IsErr() ||
		request.SetPathWithQuery(witTypes.Some(path)).IsErr() {
		return nil, invalid
	}
	outgoing := request.Body()
	if outgoing.IsErr() {
		return nil, &wasmop.HTTPError{Kind: wasmop.HTTPFailed, Detail: "request body taken twice"}
	}
	future := handler.Handle(request, witTypes.None[*http.RequestOptions]())
	if future.IsErr() {
		return nil, failed(future.Err())
	}
	// A server may answer before it reads the body, and the body stream
	// then closes: that answer, or the host's refusal, is still the outcome.
	var writeError error
	if body != nil {
		stream := outgoing.Ok().Write()
		if stream.IsOk() {
			for at := 0; at < len(body); at += 4096 {
				written := stream.Ok().BlockingWriteAndFlush(body[at:min(at+4096, len(body))])
				if written.IsErr() {
					writeError = &wasmop.HTTPError{Kind: wasmop.HTTPFailed, Detail: "writing the body: " + streamError(written.Err())}
					break
				}
			}
			stream.Ok().Drop()
		}
	}
	if finished := http.OutgoingBodyFinish(outgoing.Ok(), witTypes.None[*http.Fields]()); finished.IsErr() && writeError == nil {
		writeError = failed(finished.Err())
	}
	pollable := future.Ok().Subscribe()
	pollable.Block()
	pollable.Drop()
	outcome := future.Ok().Get()
	if outcome.IsNone() || outcome.Some().IsErr() {
		if writeError != nil {
			return nil, writeError
		}
		return nil, &wasmop.HTTPError{Kind: wasmop.HTTPFailed, Detail: "no response"}
	}
	answer := outcome.Some().Ok()
	if answer.IsErr() {
		return nil, failed(answer.Err())
	}
	response := answer.Ok()
	out := &wasmop.HTTPResponse{Status: int(response.Status())}
	fields := response.Headers()
	for _, entry := range fields.Entries() {
		out.Headers = append(out.Headers, wasmop.HTTPHeader{Name: strings.ToLower(entry.F0), Value: entry.F1})
	}
	fields.Drop()
	incoming := response.Consume()
	if incoming.IsErr() {
		return nil, &wasmop.HTTPError{Kind: wasmop.HTTPFailed, Detail: "response body taken twice"}
	}
	stream := incoming.Ok().Stream()
	if stream.IsErr() {
		return nil, &wasmop.HTTPError{Kind: wasmop.HTTPFailed, Detail: "response stream taken twice"}
	}
	for {
		read := stream.Ok().BlockingRead(chunk)
		if read.IsErr() {
			if read.Err().Tag() == streams.StreamError_Closed {
				break
			}
			return nil, &wasmop.HTTPError{Kind: wasmop.HTTPFailed, Detail: "reading the body: " + read.Err().LastOperationFailed().ToDebugString()}
		}
		out.Body = append(out.Body, read.Ok()...)
	}
	stream.Ok().Drop()
	http.IncomingBodyFinish(incoming.Ok()).Drop()
	response.Drop()
	return out, nil
}
