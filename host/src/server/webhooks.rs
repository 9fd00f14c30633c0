//! The HTTPS endpoint: `POST /mutate/<guest>`, `/validate/<guest>` and
//! `/convert/<guest>`, each answered by the guest's current module version
//! in a fresh instance under its limits.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use kube::core::DynamicObject;
use kube::core::Status;
use kube::core::admission::{AdmissionRequest, AdmissionResponse as KubeResponse, AdmissionReview};
use kube::core::conversion::{ConversionRequest, ConversionResponse, ConversionReview};

use crate::runtime::Guest;
use crate::settings::FailurePolicy;
use crate::telemetry::metrics::{WebhookCodeLabels, WebhookLabels};
use crate::webhook::{Listening, Served, Webhooks, admission, conversion};

/// The largest AdmissionReview: two objects of the API server's ~3 MiB
/// limit.
const MAX_ADMISSION_BODY: usize = 8 << 20;
/// The largest ConversionReview: the objects of a page of a list.
const MAX_CONVERSION_BODY: usize = 64 << 20;
/// Connections served at once; more wait to be accepted.
const MAX_CONNECTIONS: usize = 256;
/// How long a client may take for the TLS handshake, a request's headers,
/// and its body.
const READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Serves `webhooks` on `listening` until the process ends.
pub fn spawn(listening: Listening, webhooks: Webhooks) {
    let Listening { listener, tls } = listening;
    let router = Router::new()
        .route("/mutate/{guest}", post(mutate))
        .route("/validate/{guest}", post(validate))
        .route("/convert/{guest}", post(convert))
        .layer(DefaultBodyLimit::disable())
        .with_state(webhooks);
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    let connections = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    tokio::spawn(async move {
        loop {
            let Ok(permit) = connections.clone().acquire_owned().await else {
                return;
            };
            let (stream, peer) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!("webhook listener: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            };
            let (acceptor, router) = (acceptor.clone(), router.clone());
            tokio::spawn(async move {
                connection(stream, peer, acceptor, router).await;
                drop(permit);
            });
        }
    });
}

async fn connection(
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    acceptor: tokio_rustls::TlsAcceptor,
    router: Router,
) {
    let handshake = tokio::time::timeout(READ_TIMEOUT, acceptor.accept(stream));
    let tls = match handshake.await {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) => {
            tracing::debug!(%peer, "webhook TLS handshake failed: {e}");
            return;
        }
        Err(_) => {
            tracing::debug!(%peer, "webhook TLS handshake timed out");
            return;
        }
    };
    let service = hyper_util::service::TowerToHyperService::new(router);
    if let Err(e) = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(READ_TIMEOUT)
        .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
        .await
    {
        tracing::debug!(%peer, "webhook connection: {e}");
    }
}

/// Counts a request in the controller-runtime webhook metrics while it runs.
struct InFlight<'a> {
    webhooks: &'a Webhooks,
    path: String,
    started: Instant,
}

impl<'a> InFlight<'a> {
    fn start(webhooks: &'a Webhooks, path: String) -> Self {
        let webhook = WebhookLabels {
            webhook: path.clone(),
        };
        let metrics = webhooks.metrics();
        metrics.webhook_in_flight.get_or_create(&webhook).inc();
        // At zero from the first request, so a failure ratio is 0, not absent.
        drop(metrics.webhook_failures.get_or_create(&webhook));
        Self {
            webhooks,
            path,
            started: Instant::now(),
        }
    }

    /// The guest gave no answer: the failure policy decided.
    fn failed(&self) {
        self.webhooks
            .metrics()
            .webhook_failures
            .get_or_create(&WebhookLabels {
                webhook: self.path.clone(),
            })
            .inc();
    }

    fn done(self, code: StatusCode) {
        let metrics = self.webhooks.metrics();
        let webhook = WebhookLabels {
            webhook: self.path.clone(),
        };
        metrics
            .webhook_latency
            .get_or_create(&webhook)
            .observe(self.started.elapsed().as_secs_f64());
        metrics
            .webhook_requests
            .get_or_create(&WebhookCodeLabels {
                webhook: self.path.clone(),
                code: code.as_u16().to_string(),
            })
            .inc();
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.webhooks
            .metrics()
            .webhook_in_flight
            .get_or_create(&WebhookLabels {
                webhook: self.path.clone(),
            })
            .dec();
    }
}

async fn mutate(state: State<Webhooks>, guest: Path<String>, body: axum::body::Body) -> Response {
    admit(state, guest, body, true).await
}

async fn validate(state: State<Webhooks>, guest: Path<String>, body: axum::body::Body) -> Response {
    admit(state, guest, body, false).await
}

/// The request body, at most `limit` bytes, within [`READ_TIMEOUT`].
async fn read_body(body: axum::body::Body, limit: usize) -> Result<axum::body::Bytes, Response> {
    match tokio::time::timeout(READ_TIMEOUT, axum::body::to_bytes(body, limit)).await {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(e)) => Err((
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the body is unreadable or over {limit} bytes: {e}"),
        )
            .into_response()),
        Err(_) => Err((StatusCode::REQUEST_TIMEOUT, "the body took too long").into_response()),
    }
}

async fn admit(
    State(webhooks): State<Webhooks>,
    Path(guest): Path<String>,
    body: axum::body::Body,
    mutating: bool,
) -> Response {
    let path = format!("/{}/{guest}", if mutating { "mutate" } else { "validate" });
    let path = webhooks.known_path(&guest, path);
    let flight = InFlight::start(&webhooks, path);
    let body = match read_body(body, MAX_ADMISSION_BODY).await {
        Ok(body) => body,
        Err(response) => {
            flight.done(response.status());
            return response;
        }
    };
    let review: AdmissionReview<DynamicObject> = match serde_json::from_slice(&body) {
        Ok(review) => review,
        Err(e) => {
            flight.done(StatusCode::BAD_REQUEST);
            return (
                StatusCode::BAD_REQUEST,
                format!("not an AdmissionReview: {e}"),
            )
                .into_response();
        }
    };
    let request: AdmissionRequest<DynamicObject> = match review.try_into() {
        Ok(request) => request,
        Err(e) => {
            flight.done(StatusCode::BAD_REQUEST);
            return (StatusCode::BAD_REQUEST, format!("{e}")).into_response();
        }
    };
    let response = verdict(&webhooks, &guest, &request, mutating)
        .await
        .unwrap_or_else(|policy| {
            flight.failed();
            policy
        });
    flight.done(StatusCode::OK);
    json(&response.into_review())
}

/// The guest's verdict, or (`Err`) the failure policy's.
async fn verdict(
    webhooks: &Webhooks,
    name: &str,
    request: &AdmissionRequest<DynamicObject>,
    mutating: bool,
) -> Result<KubeResponse, KubeResponse> {
    let Some(served) = webhooks.served(name) else {
        return Err(KubeResponse::from(request)
            .deny(format!("wasmop guest {name:?} is not running on this host")));
    };
    let guest = served.slot.current();
    let review = admission::review(request, mutating, guest.settings());
    // The verdict is checked (its patch applied) on the guest's blocking
    // thread, under its concurrency and limits: that work is the guest's.
    let owned = request.clone();
    let bounds = admission::PatchBounds::of(guest.limits());
    let call = move |g: &Guest| {
        g.admit(&review).map(|verdict| {
            verdict.map(|verdict| admission::answer(&owned, verdict, mutating, bounds))
        })
    };
    let failure = match guarded(&served, &guest, call).await {
        Ok(None) => return Ok(KubeResponse::from(request)),
        Ok(Some(Ok(answered))) => match answered {
            Ok(response) => {
                tracing::debug!(guest = %name, uid = %request.uid, allowed = response.allowed, mutating, "admission verdict");
                return Ok(response);
            }
            Err(e) => format!("refused verdict: {e}"),
        },
        Ok(Some(Err(e))) => {
            webhooks.metrics().guest_failed(name, e.reason());
            e.to_string()
        }
        Err(why) => why,
    };
    let message = format!("wasmop guest {name:?} failed to admit: {failure}");
    tracing::warn!(guest = %name, uid = %request.uid, policy = ?served.failure_policy, "{message}");
    Err(match served.failure_policy {
        FailurePolicy::Fail => {
            let mut response = KubeResponse::from(request)
                .deny(admission::truncate(&message, admission::MAX_MESSAGE_BYTES));
            response.result.code = 500;
            response.result.reason = "InternalError".into();
            response
        }
        FailurePolicy::Ignore => {
            let mut response = KubeResponse::from(request);
            response.warnings = Some(vec![admission::truncate(
                &format!("{message} (admitted: admissionFailurePolicy Ignore)"),
                admission::MAX_WARNING_BYTES,
            )]);
            response
        }
    })
}

async fn convert(
    State(webhooks): State<Webhooks>,
    Path(name): Path<String>,
    body: axum::body::Body,
) -> Response {
    let path = webhooks.known_path(&name, format!("/convert/{name}"));
    let flight = InFlight::start(&webhooks, path);
    let body = match read_body(body, MAX_CONVERSION_BODY).await {
        Ok(body) => body,
        Err(response) => {
            flight.done(response.status());
            return response;
        }
    };
    let review: ConversionReview = match serde_json::from_slice(&body) {
        Ok(review) => review,
        Err(e) => {
            flight.done(StatusCode::BAD_REQUEST);
            return (
                StatusCode::BAD_REQUEST,
                format!("not a ConversionReview: {e}"),
            )
                .into_response();
        }
    };
    let request = match ConversionRequest::from_review(review) {
        Ok(request) => request,
        Err(e) => {
            flight.done(StatusCode::BAD_REQUEST);
            return (StatusCode::BAD_REQUEST, e.to_string()).into_response();
        }
    };
    let objects = request.objects.clone();
    let desired = request.desired_api_version.clone();
    let response = ConversionResponse::for_request(request);
    let response = match converted(&webhooks, &name, &objects, &desired).await {
        Ok(converted) => response.success(converted),
        Err(message) => {
            tracing::warn!(guest = %name, "{message}");
            flight.failed();
            response.failure(failure(message))
        }
    };
    flight.done(StatusCode::OK);
    json(&response.into_review())
}

async fn converted(
    webhooks: &Webhooks,
    name: &str,
    objects: &[serde_json::Value],
    desired: &str,
) -> Result<Vec<serde_json::Value>, String> {
    let fail = |why: String| format!("wasmop guest {name:?} failed to convert to {desired}: {why}");
    let served = webhooks
        .served(name)
        .ok_or_else(|| fail("it is not running on this host".into()))?;
    let guest = served.slot.current();
    let texts: Vec<String> = objects.iter().map(serde_json::Value::to_string).collect();
    let desired_owned = desired.to_owned();
    let call = guarded(&served, &guest, move |g| g.convert(&texts, &desired_owned)).await;
    match call {
        Ok(None) => Err(fail("its module has no convert".into())),
        Ok(Some(Ok(Ok(texts)))) => conversion::check(objects, texts, desired)
            .map_err(|e| fail(format!("refused answer: {e}"))),
        Ok(Some(Ok(Err(message)))) => Err(fail(admission::truncate(
            &message,
            admission::MAX_MESSAGE_BYTES,
        ))),
        Ok(Some(Err(e))) => {
            webhooks.metrics().guest_failed(name, e.reason());
            Err(fail(e.to_string()))
        }
        Err(why) => Err(fail(why)),
    }
}

/// Runs `call` on `guest` on the blocking pool, holding one of the
/// guest's webhook call permits, waited for at most the guest's deadline.
/// The error says why the call did not run or finish.
async fn guarded<T: Send + 'static>(
    served: &Served,
    guest: &Guest,
    call: impl FnOnce(&Guest) -> T + Send + 'static,
) -> Result<T, String> {
    let permit = tokio::time::timeout(
        guest.limits().timeout,
        served.permits.clone().acquire_owned(),
    )
    .await
    .ok()
    .and_then(Result::ok)
    .ok_or("every webhook call slot of the guest (its concurrency) stayed busy for its deadline")?;
    let guest = guest.clone();
    tokio::task::spawn_blocking(move || {
        let answer = call(&guest);
        drop(permit);
        answer
    })
    .await
    .map_err(|e| format!("the call did not finish: {e}"))
}

fn failure(message: String) -> Status {
    Status::failure(&message, "InternalError").with_code(500)
}

/// `value` as an `application/json` response.
fn json(value: &impl serde::Serialize) -> Response {
    match serde_json::to_vec(value) {
        Ok(body) => (
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}
