//! The host's API clients: one per guest, each telling the API server who
//! it is, each counted and fenced.
//!
//! Every request carries the User-Agent `wasmop/<version>`, and the
//! requests made for a guest `wasmop/<version> guest/<name>`, so the API
//! server's audit log and metrics tell the host's requests apart, and each
//! guest's from the others'. Each guest's client has its own connection
//! pool, so one guest's slow requests do not queue another's.
//!
//! A tower layer under every client counts requests by status code, method
//! and host (`rest_client_requests_total`) and fences writes: while leader
//! election is on and this host is not the leader (or could not renew its
//! lease before the renew deadline), a request that is not a read fails
//! before it leaves the process. The fence is in the transport, so no code
//! path can write around it; only the leader-election client itself, which
//! must write the Lease, goes without it.
//!
//! The same layer tells when the API server stops answering and when it
//! answers again ([`ApiHealth`]): a controller then retries every parent at
//! once instead of leaving each in the backoff its failures during the
//! outage built up. Watches retry on [`watch_backoff`]'s schedule, short
//! enough that one of them finds the API server back within seconds.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{HeaderName, HeaderValue, Method, Request, Response};
use kube::client::{Body, ClientBuilder};
use tower::{BoxError, Layer, Service};

use crate::leader::Leadership;
use crate::telemetry::Metrics;
use crate::telemetry::metrics::RestLabels;

/// The User-Agent of the host's own requests.
pub fn user_agent() -> String {
    format!("wasmop/{}", env!("CARGO_PKG_VERSION"))
}

/// Builds the host's clients from one configuration.
#[derive(Clone)]
pub struct Clients {
    config: kube::Config,
    metrics: Arc<Metrics>,
    leadership: Leadership,
    health: ApiHealth,
    host: kube::Client,
}

/// How a watch retries after an error: 250 ms doubling to 2 s, with jitter,
/// starting over after a minute without errors. client-go's reflector waits
/// up to 30 s; here a restarted API server is seen within ~4 s, and a
/// watch costs the API server one request per retry.
pub fn watch_backoff() -> impl kube::runtime::utils::Backoff {
    let builder = backon::ExponentialBuilder::default()
        .with_min_delay(std::time::Duration::from_millis(250))
        .with_max_delay(std::time::Duration::from_secs(2))
        .with_factor(2.0)
        .with_jitter()
        .without_max_times();
    kube::runtime::utils::ResetTimerBackoff::new(
        kube::runtime::watcher::ExponentialBackoff::from(builder),
        std::time::Duration::from_secs(60),
    )
}

/// Whether the API server answers, as every request through the host's
/// clients sees it: a transport error or a 500/502/503/504 marks it
/// unreachable, any other answer reachable again. Each return to reachable
/// is counted on a watch channel the controllers follow.
#[derive(Clone, Debug)]
pub struct ApiHealth {
    inner: Arc<HealthState>,
}

#[derive(Debug)]
struct HealthState {
    down_since: std::sync::Mutex<Option<std::time::Instant>>,
    recoveries: tokio::sync::watch::Sender<u64>,
}

impl Default for ApiHealth {
    fn default() -> Self {
        Self {
            inner: Arc::new(HealthState {
                down_since: std::sync::Mutex::new(None),
                recoveries: tokio::sync::watch::channel(0).0,
            }),
        }
    }
}

impl ApiHealth {
    /// A receiver that changes each time the API server answers again after
    /// it stopped.
    pub fn recoveries(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.recoveries.subscribe()
    }

    fn failed(&self, why: &dyn std::fmt::Display) {
        let mut down = self.inner.down_since.lock().expect("health lock");
        if down.is_none() {
            *down = Some(std::time::Instant::now());
            tracing::warn!("the API server does not answer: {why}");
        }
    }

    fn answered(&self) {
        let since = self.inner.down_since.lock().expect("health lock").take();
        if let Some(since) = since {
            tracing::info!(
                down_for = ?since.elapsed(),
                "the API server answers again; retrying every parent now"
            );
            self.inner.recoveries.send_modify(|n| *n += 1);
        }
    }
}

/// A write refused because this host is not the leader.
#[derive(Debug, thiserror::Error)]
#[error("not the leader: writes are fenced until this host holds the lease")]
pub struct NotLeader;

impl Clients {
    /// Clients for `config`; fails if it cannot make one.
    pub fn new(
        config: kube::Config,
        metrics: Arc<Metrics>,
        leadership: Leadership,
        health: ApiHealth,
    ) -> kube::Result<Self> {
        let host = build(&config, user_agent(), &metrics, &health, Some(&leadership))?;
        Ok(Self {
            config,
            metrics,
            leadership,
            health,
            host,
        })
    }

    /// The client of the host's own requests (the guest list, discovery).
    pub fn host(&self) -> kube::Client {
        self.host.clone()
    }

    /// A client for the requests made for guest `name`.
    pub fn for_guest(&self, name: &str) -> kube::Result<kube::Client> {
        build(
            &self.config,
            format!("{} guest/{name}", user_agent()),
            &self.metrics,
            &self.health,
            Some(&self.leadership),
        )
    }

    /// Whether this host may write now.
    pub fn leadership(&self) -> &Leadership {
        &self.leadership
    }

    /// Whether the API server answers.
    pub fn health(&self) -> &ApiHealth {
        &self.health
    }
}

/// The client leader election runs on: counted, never fenced (it must
/// write the Lease to become the leader).
pub fn for_leader_election(
    config: &kube::Config,
    metrics: &Arc<Metrics>,
    health: &ApiHealth,
) -> kube::Result<kube::Client> {
    build(
        config,
        format!("{} leader-election", user_agent()),
        metrics,
        health,
        None,
    )
}

impl std::fmt::Debug for Clients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Clients")
            .field("cluster_url", &self.config.cluster_url)
            .finish_non_exhaustive()
    }
}

fn build(
    config: &kube::Config,
    agent: String,
    metrics: &Arc<Metrics>,
    health: &ApiHealth,
    fence: Option<&Leadership>,
) -> kube::Result<kube::Client> {
    let mut config = config.clone();
    config
        .headers
        .retain(|(name, _)| name != http::header::USER_AGENT);
    let value =
        HeaderValue::from_str(&agent).unwrap_or_else(|_| HeaderValue::from_static("wasmop"));
    config
        .headers
        .push((HeaderName::from_static("user-agent"), value));
    let host = config
        .cluster_url
        .authority()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let layer = Counted {
        metrics: metrics.clone(),
        host: Arc::from(host.as_str()),
        health: health.clone(),
        fence: fence.cloned(),
    };
    Ok(ClientBuilder::try_from(config)?.with_layer(&layer).build())
}

/// The counting and fencing layer.
#[derive(Clone)]
struct Counted {
    metrics: Arc<Metrics>,
    host: Arc<str>,
    health: ApiHealth,
    fence: Option<Leadership>,
}

impl<S> Layer<S> for Counted {
    type Service = CountedService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        CountedService {
            inner,
            layer: self.clone(),
        }
    }
}

/// See [`Counted`].
#[derive(Clone)]
struct CountedService<S> {
    inner: S,
    layer: Counted,
}

fn is_read(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

impl<S, B> Service<Request<Body>> for CountedService<S>
where
    S: Service<Request<Body>, Response = Response<B>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = Response<B>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<B>, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let method = request.method().clone();
        let layer = self.layer.clone();
        if !is_read(&method)
            && layer
                .fence
                .as_ref()
                .is_some_and(|leadership| !leadership.is_leader())
        {
            layer.count("<fenced>", &method);
            return Box::pin(async { Err(Box::new(NotLeader) as BoxError) });
        }
        let response = self.inner.call(request);
        Box::pin(async move {
            match response.await {
                Ok(response) => {
                    let status = response.status();
                    layer.count(status.as_str(), &method);
                    if matches!(status.as_u16(), 500 | 502 | 503 | 504) {
                        layer.health.failed(&status);
                    } else {
                        layer.health.answered();
                    }
                    Ok(response)
                }
                Err(e) => {
                    layer.count("<error>", &method);
                    let e: BoxError = e.into();
                    layer.health.failed(&e);
                    Err(e)
                }
            }
        })
    }
}

impl Counted {
    fn count(&self, code: &str, method: &Method) {
        self.metrics
            .rest_requests
            .get_or_create(&RestLabels {
                code: code.to_owned(),
                method: method.as_str().to_owned(),
                host: self.host.to_string(),
            })
            .inc();
    }
}

/// Makes ring, the provider kube's clients use, the process's default
/// rustls provider, which clients built by other crates (oci-client's
/// reqwest) take. Calling it again changes nothing.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
