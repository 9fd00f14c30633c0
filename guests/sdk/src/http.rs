//! Outbound HTTP through the standard `wasi:http/outgoing-handler` import.
//!
//! Only a guest built with the feature `http` imports `wasi:http`; without
//! it every request fails with [`HttpError::Unavailable`] and the component
//! keeps its log-only imports. The host lets a
//! request out only to what the guest-list entry's `allowedOutboundHosts`
//! names (default: nothing), within the reconcile's deadline, with at most
//! 1 MiB of response body. A refused request is an [`HttpError`] here and a
//! Warning Event on the parent. Redirects are returned, not followed.
//!
//! Natively (unit tests, benchmarks) every request fails with
//! [`HttpError::Unavailable`] too, so logic that depends on a remote answer
//! is tested on its failure path without a network.

/// An HTTP method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// GET.
    Get,
    /// PUT.
    Put,
    /// POST.
    Post,
    /// DELETE.
    Delete,
}

/// A response: its status, headers and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The HTTP status code.
    pub status: u16,
    /// The headers, names in lower case, in the order received.
    pub headers: Vec<(String, Vec<u8>)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Response {
    /// Whether the status is 2xx.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The first value of header `name` (lower case) as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, v)| std::str::from_utf8(v).ok())
    }
}

/// Why a request got no response.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpError {
    /// The URL is not `http(s)://host[:port][/path]`.
    #[error("invalid URL {0:?}")]
    InvalidUrl(String),
    /// The host refused the request: not in `allowedOutboundHosts`, or an
    /// address it does not allow.
    #[error("refused by the host: {0}")]
    Refused(String),
    /// The request failed on the way (connection, TLS, timeout, size).
    #[error("request failed: {0}")]
    Failed(String),
    /// No outbound HTTP in this build (native).
    #[error("outbound HTTP is unavailable: {0}")]
    Unavailable(&'static str),
}

/// Sends one request with an optional body (sent as
/// `content-type: application/json` when given) and reads the whole
/// response.
pub fn send(method: Method, url: &str, body: Option<&[u8]>) -> Result<Response, HttpError> {
    let (scheme, authority, path) = split(url)?;
    imp::send(method, scheme, authority, path, body)
}

/// `https` or `http`, the authority and the path with query.
fn split(url: &str) -> Result<(&str, &str, &str), HttpError> {
    let invalid = || HttpError::InvalidUrl(url.to_owned());
    let (scheme, rest) = url.split_once("://").ok_or_else(invalid)?;
    if scheme != "http" && scheme != "https" {
        return Err(invalid());
    }
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, "/"),
    };
    if authority.is_empty() {
        return Err(invalid());
    }
    Ok((scheme, authority, path))
}

#[cfg(all(target_arch = "wasm32", feature = "http"))]
mod imp {
    use wasip2::http::outgoing_handler;
    use wasip2::http::types::{
        ErrorCode, Fields, IncomingBody, Method as WasiMethod, OutgoingBody, OutgoingRequest,
        Scheme,
    };

    use super::{HttpError, Method, Response};

    /// Bytes read per call from the response body.
    const CHUNK: u64 = 64 << 10;

    fn failed(code: &ErrorCode) -> HttpError {
        match code {
            ErrorCode::HttpRequestDenied | ErrorCode::DestinationIpProhibited => {
                HttpError::Refused(format!("{code:?}"))
            }
            other => HttpError::Failed(format!("{other:?}")),
        }
    }

    pub(super) fn send(
        method: Method,
        scheme: &str,
        authority: &str,
        path: &str,
        body: Option<&[u8]>,
    ) -> Result<Response, HttpError> {
        let headers = Fields::new();
        if body.is_some() {
            let _ = headers.append("content-type", b"application/json");
        }
        let request = OutgoingRequest::new(headers);
        let set = |ok: Result<(), ()>| {
            ok.map_err(|()| HttpError::InvalidUrl(format!("{scheme}://{authority}{path}")))
        };
        set(request.set_method(&match method {
            Method::Get => WasiMethod::Get,
            Method::Put => WasiMethod::Put,
            Method::Post => WasiMethod::Post,
            Method::Delete => WasiMethod::Delete,
        }))?;
        set(request.set_scheme(Some(&if scheme == "https" {
            Scheme::Https
        } else {
            Scheme::Http
        })))?;
        set(request.set_authority(Some(authority)))?;
        set(request.set_path_with_query(Some(path)))?;
        let outgoing = request
            .body()
            .map_err(|()| HttpError::Failed("request body taken twice".into()))?;
        let future = outgoing_handler::handle(request, None).map_err(|e| failed(&e))?;
        // A server may answer before it reads the body, and the body stream
        // then closes: that answer, or the host's refusal, is still the
        // outcome.
        let mut write_error = None;
        if let Some(bytes) = body {
            let stream = outgoing
                .write()
                .map_err(|()| HttpError::Failed("request body stream taken twice".into()))?;
            for chunk in bytes.chunks(4096) {
                if let Err(e) = stream.blocking_write_and_flush(chunk) {
                    write_error = Some(HttpError::Failed(format!("writing the body: {e:?}")));
                    break;
                }
            }
        }
        if let Err(e) = OutgoingBody::finish(outgoing, None) {
            write_error.get_or_insert(failed(&e));
        }
        future.subscribe().block();
        let response = match future.get() {
            Some(Ok(Ok(response))) => response,
            Some(Ok(Err(code))) => return Err(failed(&code)),
            Some(Err(())) | None => {
                return Err(write_error.unwrap_or_else(|| HttpError::Failed("no response".into())));
            }
        };
        let status = response.status();
        let headers = response
            .headers()
            .entries()
            .into_iter()
            .map(|(name, value)| (name.to_ascii_lowercase(), value))
            .collect();
        let incoming = response
            .consume()
            .map_err(|()| HttpError::Failed("response body taken twice".into()))?;
        let mut bytes = Vec::new();
        {
            let stream = incoming
                .stream()
                .map_err(|()| HttpError::Failed("response stream taken twice".into()))?;
            loop {
                match stream.blocking_read(CHUNK) {
                    Ok(chunk) => bytes.extend_from_slice(&chunk),
                    Err(wasip2::io::streams::StreamError::Closed) => break,
                    Err(wasip2::io::streams::StreamError::LastOperationFailed(e)) => {
                        return Err(HttpError::Failed(format!(
                            "reading the body: {}",
                            e.to_debug_string()
                        )));
                    }
                }
            }
        }
        drop(IncomingBody::finish(incoming));
        drop(response);
        Ok(Response {
            status,
            headers,
            body: bytes,
        })
    }
}

#[cfg(not(all(target_arch = "wasm32", feature = "http")))]
mod imp {
    use super::{HttpError, Method, Response};

    pub(super) fn send(
        _method: Method,
        _scheme: &str,
        _authority: &str,
        _path: &str,
        _body: Option<&[u8]>,
    ) -> Result<Response, HttpError> {
        Err(HttpError::Unavailable(
            "outbound HTTP exists only in the wasm build",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_scheme_authority_and_path() {
        assert_eq!(
            split("https://r.example.com:8443/caches/a/b?x=1").unwrap(),
            ("https", "r.example.com:8443", "/caches/a/b?x=1")
        );
        assert_eq!(
            split("http://127.0.0.1:8089").unwrap(),
            ("http", "127.0.0.1:8089", "/")
        );
        assert!(split("ftp://x/").is_err());
        assert!(split("http:///x").is_err());
        assert!(matches!(
            send(Method::Get, "http://127.0.0.1/", None),
            Err(HttpError::Unavailable(_))
        ));
    }
}
