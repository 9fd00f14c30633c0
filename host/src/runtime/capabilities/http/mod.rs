//! Outbound HTTP, a capability a guest gets by importing
//! `wasi:http/outgoing-handler` and being granted hosts in its
//! `allowedOutboundHosts` (default: none).
//!
//! wasmtime-wasi-http turns the guest's request into an `http::Request` and
//! hands it to [`Outbound::send_request`], the only way out. There, before
//! any connection:
//! - scheme, host and port must match an entry ([`allow`]);
//! - the name is resolved once (fully qualified, at most [`MAX_LOOKUPS`]
//!   lookups at a time in the host), every address is checked against the
//!   entry ([`allow::Entry::admits`]), and the connection goes to an address
//!   that passed, so a name cannot be rebound between check and connect;
//! - the request, its connection and its response body share the call's
//!   deadline, and the body is capped at [`MAX_RESPONSE_BODY`].
//!
//! Redirects are answers like any other: nothing follows them but the
//! guest, whose next request is checked again. A call makes at most
//! [`MAX_REQUESTS_PER_CALL`] requests. Every request is counted in
//! `wasmop_guest_http_requests_total{guest,method,host,code}`, where `host`
//! is the entry that allowed it (or `(not allowed)`: a guest cannot grow the
//! label set), and logged with the URL's host, never with a body; the first
//! few refused ones of a call are logged and kept for the caller, which
//! reports them as a Warning Event.

pub mod allow;

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use tokio::time::Instant;
use tracing::Instrument as _;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

use super::wasi::Wasi;

use crate::telemetry::Metrics;
use crate::telemetry::metrics::OutboundLabels;
pub use allow::{Entry, EntryError, OutboundHosts};
use allow::{Scheme, Target, TargetHost};

/// Largest response body a guest may read from one request. A registry's
/// answer is a few hundred bytes; the guest's own memory cap bounds what it
/// can hold anyway.
pub const MAX_RESPONSE_BODY: usize = 1 << 20;

/// How long a connection may outlive its call's deadline.
const CONNECTION_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// Future of a response and of the connection that carries its body, as
/// wasmtime-wasi-http takes them.
type Sent = Box<
    dyn Future<
            Output = Result<
                (
                    http::Response<WasiBody>,
                    Box<dyn Future<Output = Result<(), Error>> + Send>,
                ),
                Error,
            >,
        > + Send,
>;

/// The outbound side of one guest call.
pub(crate) struct Outbound {
    hosts: Arc<OutboundHosts>,
    guest: Arc<str>,
    deadline: Instant,
    metrics: Arc<Metrics>,
    refused: Arc<Mutex<Vec<String>>>,
    /// Requests this call made so far.
    requests: usize,
}

impl Outbound {
    /// The grant of `guest` for a call that ends at `deadline`.
    pub(crate) fn new(
        hosts: Arc<OutboundHosts>,
        guest: Arc<str>,
        deadline: std::time::Instant,
        metrics: Arc<Metrics>,
    ) -> Self {
        Self {
            hosts,
            guest,
            deadline: Instant::from_std(deadline),
            metrics,
            refused: Arc::default(),
            requests: 0,
        }
    }

    /// A grant of nothing, for a guest the host did not expect to call out.
    pub(crate) fn deny_all(guest: Arc<str>) -> Self {
        Self::new(
            Arc::default(),
            guest,
            std::time::Instant::now(),
            Metrics::new(),
        )
    }

    /// The requests refused so far, one line each (URL and why).
    pub(crate) fn refused(&self) -> Vec<String> {
        self.refused.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

/// What the host buffers of a request body the guest writes: one chunk
/// of at most 64 KiB. wasmtime-wasi-http's defaults (1 MiB chunks) let a
/// guest park megabytes in host memory per body it never sends.
const BODY_CHUNK_BYTES: usize = 64 << 10;

/// Name lookups that may run at once in the whole host. `getaddrinfo`
/// blocks a thread and cannot be cancelled, so a lookup outlives the call
/// that gave up on it; the bound keeps slow DNS from filling the blocking
/// pool every reconcile needs.
const MAX_LOOKUPS: usize = 8;

impl WasiHttpHooks for Outbound {
    fn p2_outgoing_body_buffer_chunks(&mut self) -> usize {
        1
    }

    fn p2_outgoing_body_chunk_size(&mut self) -> usize {
        BODY_CHUNK_BYTES
    }

    fn send_request(
        &mut self,
        mut request: http::Request<WasiBody>,
        _options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), Error>> + Send>,
    ) -> Sent {
        // A child of the guest call (this runs inside it); the request
        // carries its trace context, replacing any the guest set.
        let span = tracing::info_span!(
            target: crate::telemetry::traces::TARGET,
            "outbound request",
            otel.name = %format_args!("{} {}", method_label(request.method()), redacted(request.uri())),
            otel.kind = "client",
            http.request.method = method_label(request.method()),
            url.full = %redacted(request.uri()),
            http.response.status_code = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
        );
        crate::telemetry::traces::inject(&span, request.headers_mut());
        let traced = span.clone();
        let mut call = Call {
            span: span.clone(),
            guest: self.guest.clone(),
            method: method_label(request.method()),
            metrics: self.metrics.clone(),
            refused: self.refused.clone(),
            target: Target::of(request.uri()),
            entry: None,
            uri: redacted(request.uri()),
        };
        let hosts = self.hosts.clone();
        let deadline = self.deadline;
        self.requests += 1;
        let over_limit = self.requests > MAX_REQUESTS_PER_CALL;
        Box::new(async move {
            if over_limit {
                return Err(call.refuse(&format!(
                    "more than {MAX_REQUESTS_PER_CALL} requests in one call"
                )));
            }
            let Some(target) = call.target.clone() else {
                return Err(call.refuse("the URL has no http or https scheme and host"));
            };
            let Some(entry) = hosts.entry_for(&target).cloned() else {
                return Err(call.refuse(&format!(
                    "{target} is not in the guest's allowedOutboundHosts"
                )));
            };
            call.entry = Some(entry.to_string());
            let sent =
                tokio::time::timeout_at(deadline, send(request, &target, &entry, deadline, &call))
                    .await;
            let result = match sent {
                Ok(result) => result,
                Err(_) => Err(Error::HttpResponseTimeout),
            };
            match &result {
                Ok((response, _)) => {
                    crate::telemetry::traces::answered(&traced, Some(response.status()));
                    call.record(response.status().as_str());
                }
                Err(Error::DestinationIpProhibited) => {
                    crate::telemetry::traces::answered(&traced, None);
                }
                Err(e) => {
                    crate::telemetry::traces::answered(&traced, None);
                    tracing::warn!(guest = %call.guest, method = %call.method, host = %target, "outbound request failed: {e}");
                    call.count("error");
                }
            }
            result
        }
        .instrument(span))
    }
}

/// What one request is logged and counted as.
struct Call {
    guest: Arc<str>,
    /// One of the standard methods, or `OTHER`.
    method: &'static str,
    metrics: Arc<Metrics>,
    refused: Arc<Mutex<Vec<String>>>,
    target: Option<Target>,
    /// The entry that allowed the request, once one did.
    entry: Option<String>,
    uri: String,
    /// The request's span (traces).
    span: tracing::Span,
}

/// The `host` label of a request no entry allowed: the guest chose that
/// host, so naming it would let a guest grow the metrics without bound.
const NOT_ALLOWED: &str = "(not allowed)";

impl Call {
    fn host(&self) -> String {
        self.target
            .as_ref()
            .map_or_else(|| "<invalid>".to_owned(), ToString::to_string)
    }

    /// Counted under the entry that allowed the request (so the labels are
    /// bounded by the guest's list) or [`NOT_ALLOWED`].
    fn count(&self, code: &str) {
        self.metrics
            .outbound_requests
            .get_or_create(&OutboundLabels {
                guest: self.guest.to_string(),
                method: self.method.to_owned(),
                host: self.entry.clone().unwrap_or_else(|| NOT_ALLOWED.to_owned()),
                code: code.to_owned(),
            })
            .inc();
    }

    fn record(&self, code: &str) {
        tracing::info!(guest = %self.guest, method = %self.method, host = %self.host(), code, "outbound request");
        self.count(code);
    }

    /// Counts, logs and keeps a refusal; the guest sees `HTTP-request-denied`
    /// (or `destination-IP-prohibited` for an address).
    fn refuse(&self, why: &str) -> Error {
        crate::telemetry::traces::answered(&self.span, None);
        self.count("refused");
        // Logged and kept for the Event up to a few per call: a guest that
        // loops on refused requests must not flood the host's log.
        if let Ok(mut refused) = self.refused.lock()
            && refused.len() < MAX_REFUSALS_KEPT
        {
            tracing::warn!(guest = %self.guest, method = %self.method, host = %self.host(), "outbound request refused: {why}");
            refused.push(format!("{} {}: {why}", self.method, self.uri));
        }
        Error::HttpRequestDenied
    }
}

/// Refusals one call logs and keeps for its Event; more are only counted.
const MAX_REFUSALS_KEPT: usize = 8;

/// Requests one call may make; beyond, each is refused. A reconcile talks
/// to a registry a few times, and a guest looping on requests within its
/// deadline must not turn the host into a load generator.
pub const MAX_REQUESTS_PER_CALL: usize = 64;

/// The method as a metric label: bounded, since a guest may send any.
fn method_label(method: &http::Method) -> &'static str {
    match *method {
        http::Method::GET => "GET",
        http::Method::HEAD => "HEAD",
        http::Method::POST => "POST",
        http::Method::PUT => "PUT",
        http::Method::DELETE => "DELETE",
        http::Method::PATCH => "PATCH",
        http::Method::OPTIONS => "OPTIONS",
        http::Method::CONNECT => "CONNECT",
        http::Method::TRACE => "TRACE",
        _ => "OTHER",
    }
}

/// The URL without user info and query (which may carry credentials), for
/// logs and Events, cut at 200 characters.
fn redacted(uri: &http::Uri) -> String {
    let port = uri.port().map(|p| format!(":{p}")).unwrap_or_default();
    let mut text = match (uri.scheme_str(), uri.host()) {
        (Some(scheme), Some(host)) => format!("{scheme}://{host}{port}{}", uri.path()),
        _ => uri.path().to_owned(),
    };
    if let Some((cut, _)) = text.char_indices().nth(200) {
        text.truncate(cut);
        text.push('…');
    }
    text
}

/// Resolves, checks, connects and sends.
async fn send(
    mut request: http::Request<WasiBody>,
    target: &Target,
    entry: &Entry,
    deadline: Instant,
    call: &Call,
) -> Result<
    (
        http::Response<WasiBody>,
        Box<dyn Future<Output = Result<(), Error>> + Send>,
    ),
    Error,
> {
    let addresses: Vec<SocketAddr> = match &target.host {
        TargetHost::Ip(ip) => vec![SocketAddr::new(*ip, target.port)],
        TargetHost::Name(name) => resolve(name, target.port).await?,
    };
    let (admitted, denied): (Vec<_>, Vec<_>) =
        addresses.into_iter().partition(|a| entry.admits(a.ip()));
    if admitted.is_empty() {
        let shown: Vec<String> = denied.iter().map(|a| a.ip().to_string()).collect();
        call.refuse(&format!(
            "{} resolves to {}, a non-public address; list the address itself to allow it",
            target.host,
            if shown.is_empty() {
                "nothing".to_owned()
            } else {
                shown.join(", ")
            }
        ));
        return Err(Error::DestinationIpProhibited);
    }
    let mut last = Error::ConnectionRefused;
    let mut tcp = None;
    for address in &admitted {
        match tokio::net::TcpStream::connect(address).await {
            Ok(stream) => {
                tcp = Some(stream);
                break;
            }
            Err(e) => last = Error::Connect(e),
        }
    }
    let tcp = tcp.ok_or(last)?;
    let _ = tcp.set_nodelay(true);
    let io: Box<dyn Io> = match target.scheme {
        Scheme::Http => Box::new(tcp),
        Scheme::Https => {
            let name = match &target.host {
                TargetHost::Name(n) => rustls::pki_types::ServerName::try_from(n.clone())
                    .map_err(|_| Error::HttpRequestUriInvalid)?,
                TargetHost::Ip(ip) => rustls::pki_types::ServerName::from(*ip),
            };
            let tls = tokio_rustls::TlsConnector::from(tls_config())
                .connect(name, tcp)
                .await
                .map_err(Error::Tls)?;
            Box::new(tls)
        }
    };
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(io)).await?;
    // The request line carries the path only; scheme and authority are in
    // the Host header wasmtime-wasi-http set.
    *request.uri_mut() = request
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .parse()
        .map_err(|_| Error::HttpRequestUriInvalid)?;
    // The connection outlives the call by at most a second: long enough
    // that the request's own deadline answers the guest first, and the
    // response body stops at the deadline anyway (`Capped`).
    let connection = tokio::spawn(async move {
        match tokio::time::timeout_at(deadline + CONNECTION_GRACE, connection).await {
            Ok(result) => result.map_err(Error::from),
            Err(_) => Err(Error::ConnectionReadTimeout),
        }
    });
    let response = sender.send_request(request).await?;
    let response = response.map(|incoming| {
        Capped {
            incoming,
            left: MAX_RESPONSE_BODY,
            deadline: Box::pin(tokio::time::sleep_until(deadline)),
        }
        .boxed_unsync()
    });
    let io = async move {
        connection
            .await
            .unwrap_or_else(|e| Err(Error::InternalError(Some(e.to_string()))))
    };
    Ok((response, Box::new(io)))
}

/// Resolves `name` once, holding one of [`MAX_LOOKUPS`] permits for as long
/// as the blocking lookup runs, even past a call that stopped waiting. A
/// name with a dot is looked up as written (fully qualified), not through
/// the resolver's search list, which in a pod would try
/// `<name>.<namespace>.svc.cluster.local` first.
async fn resolve(name: &str, port: u16) -> Result<Vec<SocketAddr>, Error> {
    static LOOKUPS: OnceLock<Arc<tokio::sync::Semaphore>> = OnceLock::new();
    let lookups = LOOKUPS
        .get_or_init(|| Arc::new(tokio::sync::Semaphore::new(MAX_LOOKUPS)))
        .clone();
    let permit = lookups
        .acquire_owned()
        .await
        .map_err(|_| Error::DnsTimeout)?;
    let query = if name.contains('.') {
        format!("{name}.")
    } else {
        name.to_owned()
    };
    let found = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        std::net::ToSocketAddrs::to_socket_addrs(&(query.as_str(), port))
            .map(Iterator::collect::<Vec<_>>)
    })
    .await
    .map_err(|e| Error::InternalError(Some(e.to_string())))?;
    found.map_err(|e| Error::DnsError {
        rcode: Some(e.to_string()),
        info_code: None,
    })
}

/// A stream a request can be written to: TCP, or TLS over TCP.
trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin> Io for T {}

/// A response body that ends in an error past [`MAX_RESPONSE_BODY`] bytes
/// or the call's deadline.
struct Capped {
    incoming: hyper::body::Incoming,
    left: usize,
    deadline: Pin<Box<tokio::time::Sleep>>,
}

impl Body for Capped {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        if self.deadline.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Some(Err(Error::ConnectionReadTimeout)));
        }
        match Pin::new(&mut self.incoming).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                let size = frame.data_ref().map_or(0, Bytes::len);
                if size > self.left {
                    self.left = 0;
                    return Poll::Ready(Some(Err(Error::HttpResponseBodySize(Some(
                        MAX_RESPONSE_BODY as u64,
                    )))));
                }
                self.left -= size;
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(Error::from(e)))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.incoming.is_end_stream()
    }
}

/// TLS for guests' requests: the system's trust store and Mozilla's roots,
/// with ring, the provider the rest of the host uses.
fn tls_config() -> Arc<rustls::ClientConfig> {
    static CONFIG: OnceLock<Arc<rustls::ClientConfig>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let mut roots = rustls::RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            };
            for cert in rustls_native_certs::load_native_certs().certs {
                let _ = roots.add(cert);
            }
            let config = rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .expect("ring supports the default protocol versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
            Arc::new(config)
        })
        .clone()
}

/// The view `WasiHttpView` hands wasmtime-wasi-http: the call's WASI
/// resources and its outbound grant as the hooks every request goes
/// through.
pub(crate) fn view<'a>(
    wasi: &'a mut Wasi,
    outbound: &'a mut Outbound,
) -> wasmtime_wasi_http::WasiHttpCtxView<'a> {
    wasmtime_wasi_http::WasiHttpCtxView {
        ctx: &mut wasi.http,
        table: &mut wasi.table,
        hooks: outbound,
    }
}

/// Adds `wasi:http` (its types and `outgoing-handler`) to `linker`; the
/// store's data reaches its state through `WasiHttpView` (built on
/// [`view`]).
pub(super) fn link<T: wasmtime_wasi_http::WasiHttpView + 'static>(
    linker: &mut wasmtime::component::Linker<T>,
) -> wasmtime::Result<()> {
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(linker)
}
