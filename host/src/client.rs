//! The host's API clients: one per guest, each telling the API server who
//! it is, each counted and fenced.
//!
//! Every request carries the User-Agent `wasmop/<version>`, and the
//! requests made for a guest `wasmop/<version> guest/<name>`, so the API
//! server's audit log and metrics tell the host's requests apart, and each
//! guest's from the others'. Each guest's client has its own connection
//! pool, so one guest's slow requests do not queue another's.
//!
//! Under [`GuestIdentity::Impersonate`] a guest's client also impersonates
//! the guest's ServiceAccount `wasmop-guest-<name>` in the host's
//! namespace: the API server authorizes each of the guest's requests
//! against that ServiceAccount's roles (a second wall behind the host's own
//! checks), and its audit log names the guest as the user and the host as
//! the impersonator.
//!
//! A tower layer under every client counts requests by status code, method,
//! host and guest (`rest_client_requests_total`, label `controller`) and fences writes: while leader
//! election is on and this host is not the leader (or could not renew its
//! lease before the renew deadline), a request that is not a read fails
//! before it leaves the process. The fence is in the transport, so no code
//! path can write around it; only the leader-election client itself, which
//! must write the Lease, goes without it.
//!
//! The same layer tells when the API server stops answering and when it
//! answers again ([`ApiHealth`]): a controller then retries every parent at
//! once instead of leaving each in the backoff its failures during the
//! outage built up. While it is down, [`ApiHealth::probe`] asks its
//! `/readyz` every [`PROBE_PERIOD`], so the return is seen within that
//! period whatever the watches' and the parents' backoffs are at; watches
//! retry on [`crate::retry::watch_backoff`]'s schedule.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{HeaderName, HeaderValue, Method, Request, Response};
use kube::client::{Body, ClientBuilder};
use tower::{BoxError, Layer, Service};
use tracing::Instrument as _;

use crate::leader::Leadership;
use crate::telemetry::Metrics;
use crate::telemetry::metrics::RestLabels;

/// The User-Agent of the host's own requests.
pub fn user_agent() -> String {
    format!("wasmop/{}", env!("CARGO_PKG_VERSION"))
}

/// Whose identity a guest's requests carry (`--guest-identity`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum GuestIdentity {
    /// The host's own: the API server sees one identity for every guest.
    #[default]
    Host,
    /// The guest's ServiceAccount in this namespace, by impersonation.
    Impersonate {
        /// The host's namespace, where the guests' ServiceAccounts live;
        /// empty: the kubeconfig context's namespace (in a cluster, the
        /// host's own).
        namespace: String,
    },
}

/// The User-Agent of the requests made for guest `name`.
pub fn guest_user_agent(name: &str) -> String {
    format!("{} guest/{name}", user_agent())
}

/// `config` acting for guest `name` under `identity`: impersonating its
/// ServiceAccount under [`GuestIdentity::Impersonate`], as itself
/// otherwise.
pub fn acting_as(config: &kube::Config, name: &str, identity: &GuestIdentity) -> kube::Config {
    let mut config = config.clone();
    if let GuestIdentity::Impersonate { namespace } = identity {
        config.auth_info.impersonate = Some(guest_user(namespace, name));
        config.auth_info.impersonate_groups = None;
        config.auth_info.impersonate_uid = None;
        config.auth_info.impersonate_user_extra = None;
    }
    config
}

/// A client for the requests `wasmop plan` makes for guest `name`: as the
/// host would make them, with the guest's User-Agent and identity (its
/// ServiceAccount in `identity`'s namespace, or the kubeconfig context's
/// when it names none).
pub fn planning_client(
    config: &kube::Config,
    name: &str,
    identity: &GuestIdentity,
) -> kube::Result<kube::Client> {
    let identity = match identity {
        GuestIdentity::Impersonate { namespace } if namespace.is_empty() => {
            GuestIdentity::Impersonate {
                namespace: config.default_namespace.clone(),
            }
        }
        other => other.clone(),
    };
    let mut config = acting_as(config, name, &identity);
    config
        .headers
        .retain(|(header, _)| header != http::header::USER_AGENT);
    let agent = HeaderValue::from_str(&guest_user_agent(name))
        .unwrap_or_else(|_| HeaderValue::from_static("wasmop"));
    config
        .headers
        .push((HeaderName::from_static("user-agent"), agent));
    kube::Client::try_from(config)
}

/// The ServiceAccount a guest acts as under [`GuestIdentity::Impersonate`].
pub fn guest_service_account(guest: &str) -> String {
    format!("wasmop-guest-{guest}")
}

/// The user name of [`guest_service_account`] in `namespace`, as the API
/// server authenticates it.
pub fn guest_user(namespace: &str, guest: &str) -> String {
    format!(
        "system:serviceaccount:{namespace}:{}",
        guest_service_account(guest)
    )
}

/// Builds the host's clients from one configuration.
#[derive(Clone)]
pub struct Clients {
    config: kube::Config,
    metrics: Arc<Metrics>,
    leadership: Leadership,
    health: ApiHealth,
    host: kube::Client,
    /// The host's identity, without the fence.
    unfenced: kube::Client,
    identity: GuestIdentity,
}

/// Whether the API server answers, as every request through the host's
/// clients sees it: a transport error or a 502/503/504 marks it
/// unreachable, a success (2xx) reachable again. A 500 answers one request
/// (an object etcd refuses as too large, a failing admission webhook): it
/// only makes [`ApiHealth::probe`] ask `/readyz` at once, and the API
/// server counts as unreachable when `/readyz` fails too, so one parent's
/// failure stays that parent's instead of a recovery that retries every
/// parent. Other answers change nothing: a restarting API server answers
/// 403 to everything until its authorizer has synced, and only `/readyz`
/// says when it has. Each return to reachable is counted on a watch
/// channel the controllers follow.
#[derive(Clone, Debug)]
pub struct ApiHealth {
    inner: Arc<HealthState>,
}

/// How often [`ApiHealth::probe`] asks an unreachable API server whether
/// it is back.
pub const PROBE_PERIOD: std::time::Duration = std::time::Duration::from_millis(250);

#[derive(Debug)]
struct HealthState {
    down_since: std::sync::Mutex<Option<std::time::Instant>>,
    recoveries: tokio::sync::watch::Sender<u64>,
    down: tokio::sync::watch::Sender<bool>,
    /// A request got a 500: is it the API server's, or that request's?
    suspect: tokio::sync::Notify,
}

/// The path [`ApiHealth::probe`] asks.
const READYZ: &str = "/readyz";

/// How long [`ApiHealth::probe`] waits for `/readyz`: longer than the API
/// server's own readiness checks take to fail (etcd's, 2 s by default).
const READYZ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

impl Default for ApiHealth {
    fn default() -> Self {
        Self {
            inner: Arc::new(HealthState {
                down_since: std::sync::Mutex::new(None),
                recoveries: tokio::sync::watch::channel(0).0,
                down: tokio::sync::watch::channel(false).0,
                suspect: tokio::sync::Notify::new(),
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

    /// Asks the API server's `/readyz` through `client` (which must be
    /// one of the host's, so its answer reaches this health) every
    /// [`PROBE_PERIOD`] while the API server is unreachable, and once
    /// whenever a request got a 500; does nothing while it answers. Ends
    /// when the task is aborted.
    pub fn probe(&self, client: kube::Client) -> tokio::task::JoinHandle<()> {
        let mut down = self.inner.down.subscribe();
        let inner = self.inner.clone();
        let health = self.clone();
        tokio::spawn(async move {
            let ask = || async {
                let request = http::Request::get(READYZ)
                    .body(Vec::new())
                    .expect("a GET without a body is a valid request");
                // The layer under `client` records the answer; no answer
                // within the timeout (an API server waiting on etcd for
                // its own readiness check) is a failure too.
                if tokio::time::timeout(READYZ_TIMEOUT, client.request_text(request))
                    .await
                    .is_err()
                {
                    health.failed(&"/readyz did not answer");
                }
            };
            loop {
                if *down.borrow_and_update() {
                    ask().await;
                    let _ = tokio::time::timeout(PROBE_PERIOD, down.changed()).await;
                    continue;
                }
                tokio::select! {
                    changed = down.changed() => if changed.is_err() { return },
                    () = inner.suspect.notified() => ask().await,
                }
            }
        })
    }

    /// Records an answer with `status` to a request for `path`.
    fn saw(&self, status: http::StatusCode, path: &str) {
        match status.as_u16() {
            502..=504 => self.failed(&status),
            500 if path == READYZ => self.failed(&status),
            500 => self.inner.suspect.notify_one(),
            _ if status.is_success() => self.answered(),
            _ => {}
        }
    }

    fn failed(&self, why: &dyn std::fmt::Display) {
        let mut down = self.inner.down_since.lock().expect("health lock");
        if down.is_none() {
            *down = Some(std::time::Instant::now());
            self.inner.down.send_replace(true);
            tracing::warn!("the API server does not answer: {why}");
        }
    }

    fn answered(&self) {
        let since = {
            let mut down = self.inner.down_since.lock().expect("health lock");
            let since = down.take();
            if since.is_some() {
                self.inner.down.send_replace(false);
            }
            since
        };
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
        let host = build(
            &config,
            user_agent(),
            "",
            &metrics,
            &health,
            Some(&leadership),
            None,
        )?;
        let unfenced = build(&config, user_agent(), "", &metrics, &health, None, None)?;
        Ok(Self {
            config,
            metrics,
            leadership,
            health,
            host,
            unfenced,
            identity: GuestIdentity::Host,
        })
    }

    /// These clients, with guests' requests made under `identity`.
    #[must_use]
    pub fn with_guest_identity(mut self, identity: GuestIdentity) -> Self {
        self.identity = match identity {
            // No namespace given: the one the kubeconfig's context names (in
            // a cluster, the host's own).
            GuestIdentity::Impersonate { namespace } if namespace.is_empty() => {
                GuestIdentity::Impersonate {
                    namespace: self.config.default_namespace.clone(),
                }
            }
            other => other,
        };
        self
    }

    /// The client of the host's own requests (the guest list, discovery).
    pub fn host(&self) -> kube::Client {
        self.host.clone()
    }

    /// The client of the host's own requests without the write fence: for
    /// writes that are the same whichever replica makes them.
    pub fn unfenced_host(&self) -> kube::Client {
        self.unfenced.clone()
    }

    /// A client for the requests made for guest `name`, under the guests'
    /// identity, its requests held to `budget` when it has one.
    pub fn for_guest(
        &self,
        name: &str,
        budget: Option<crate::settings::ApiBudget>,
    ) -> kube::Result<kube::Client> {
        self.for_guest_unit(name, &Budget::new(budget), &self.leadership)
    }

    /// [`Clients::for_guest`] for one unit of the guest's work: its writes
    /// fenced by `fence`, its requests held to `budget`, which every
    /// client of the guest shares.
    pub fn for_guest_unit(
        &self,
        name: &str,
        budget: &Budget,
        fence: &Leadership,
    ) -> kube::Result<kube::Client> {
        self.for_guest_doing(name, budget, fence, None)
    }

    /// [`Clients::for_guest_unit`] for one of the host's duties for the
    /// guest, named in its user agent after the guest's name
    /// (`… guest/<name> <duty>`), so the audit log tells it apart.
    pub fn for_guest_doing(
        &self,
        name: &str,
        budget: &Budget,
        fence: &Leadership,
        duty: Option<&str>,
    ) -> kube::Result<kube::Client> {
        build(
            &acting_as(&self.config, name, &self.identity),
            match duty {
                Some(duty) => format!("{} {duty}", guest_user_agent(name)),
                None => guest_user_agent(name),
            },
            name,
            &self.metrics,
            &self.health,
            Some(fence),
            budget.0.clone(),
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
        "",
        metrics,
        health,
        None,
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

/// A guest's own budget of API requests (`apiQPS`, `apiBurst`), shared by
/// every client made for the guest.
#[derive(Clone, Default)]
pub struct Budget(Option<Arc<governor::DefaultDirectRateLimiter>>);

impl Budget {
    /// The bucket of `budget`, or none.
    pub fn new(budget: Option<crate::settings::ApiBudget>) -> Self {
        Self(budget.map(|budget| {
            let burst =
                std::num::NonZeroU32::new(budget.burst).unwrap_or(std::num::NonZeroU32::MIN);
            let quota = governor::Quota::with_period(budget.period())
                .expect("a budget's period is positive")
                .allow_burst(burst);
            Arc::new(governor::RateLimiter::direct(quota))
        }))
    }
}

fn build(
    config: &kube::Config,
    agent: String,
    controller: &str,
    metrics: &Arc<Metrics>,
    health: &ApiHealth,
    fence: Option<&Leadership>,
    budget: Option<Arc<governor::DefaultDirectRateLimiter>>,
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
        controller: Arc::from(controller),
        health: health.clone(),
        fence: fence.cloned(),
        budget,
    };
    Ok(ClientBuilder::try_from(config)?.with_layer(&layer).build())
}

/// The counting and fencing layer.
#[derive(Clone)]
struct Counted {
    metrics: Arc<Metrics>,
    host: Arc<str>,
    controller: Arc<str>,
    health: ApiHealth,
    fence: Option<Leadership>,
    /// The guest's own budget of requests (`apiQPS`, `apiBurst`).
    budget: Option<Arc<governor::DefaultDirectRateLimiter>>,
}

impl<S> Layer<S> for Counted {
    type Service = CountedService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        CountedService {
            inner,
            layer: self.clone(),
            waiting: None,
            admitted: false,
        }
    }
}

/// See [`Counted`]. With a budget, the service is not ready until the
/// budget admits the next request: the client's queue (kube's buffer, one
/// per guest) holds that guest's requests, and only that guest's.
struct CountedService<S> {
    inner: S,
    layer: Counted,
    /// Until when the budget holds the next request.
    waiting: Option<Pin<Box<tokio::time::Sleep>>>,
    /// Whether the budget admitted the next request.
    admitted: bool,
}

impl<S: Clone> Clone for CountedService<S> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            layer: self.layer.clone(),
            waiting: None,
            admitted: false,
        }
    }
}

/// Whether a request to `path` with `method` may change what the cluster
/// stores: not a read, and not a review (an access or token review is a
/// POST that stores nothing, which a standby asks as the leader does).
fn writes(method: &Method, path: &str) -> bool {
    let read = matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS);
    let review = path.starts_with("/apis/authorization.k8s.io/")
        || path.starts_with("/apis/authentication.k8s.io/");
    !read && !review
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
        if let Some(budget) = &self.layer.budget {
            while !self.admitted {
                if let Some(waiting) = self.waiting.as_mut() {
                    std::task::ready!(waiting.as_mut().poll(cx));
                    self.waiting = None;
                }
                match budget.check() {
                    Ok(()) => self.admitted = true,
                    Err(not_until) => {
                        use governor::clock::Clock as _;
                        let wait = not_until
                            .wait_time_from(governor::clock::DefaultClock::default().now());
                        self.waiting = Some(Box::pin(tokio::time::sleep(wait)));
                    }
                }
            }
        }
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        self.admitted = false;
        let method = request.method().clone();
        let layer = self.layer.clone();
        if writes(&method, request.uri().path())
            && layer
                .fence
                .as_ref()
                .is_some_and(|leadership| !leadership.is_leader())
        {
            layer.count("<fenced>", &method);
            return Box::pin(async { Err(Box::new(NotLeader) as BoxError) });
        }
        let path = request.uri().path().to_owned();
        let span = crate::telemetry::traces::api_request(&method, request.uri());
        let response = span.in_scope(|| self.inner.call(request));
        let traced = span.clone();
        Box::pin(
            async move {
                match response.await {
                    Ok(response) => {
                        let status = response.status();
                        crate::telemetry::traces::answered(&traced, Some(status));
                        layer.count(status.as_str(), &method);
                        layer.health.saw(status, &path);
                        Ok(response)
                    }
                    Err(e) => {
                        crate::telemetry::traces::answered(&traced, None);
                        layer.count("<error>", &method);
                        let e: BoxError = e.into();
                        layer.health.failed(&e);
                        Err(e)
                    }
                }
            }
            .instrument(span),
        )
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
                controller: self.controller.to_string(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_standby_may_read_and_ask_reviews_but_not_write() {
        let cases = [
            (Method::GET, "/api/v1/namespaces/a/configmaps", false),
            (Method::POST, "/api/v1/namespaces/a/configmaps", true),
            (
                Method::PATCH,
                "/apis/apps/v1/namespaces/a/deployments/d",
                true,
            ),
            (Method::DELETE, "/api/v1/namespaces/a/configmaps/c", true),
            (
                Method::POST,
                "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                false,
            ),
            (
                Method::POST,
                "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                false,
            ),
        ];
        for (method, path, want) in cases {
            assert_eq!(writes(&method, path), want, "{method} {path}");
        }
    }

    #[tokio::test]
    async fn only_a_success_ends_an_outage() {
        let health = ApiHealth::default();
        let mut recoveries = health.recoveries();
        health.failed(&"connection refused");
        // A restarting API server's 403s (its authorizer not synced yet)
        // and 404s do not count as its return; a 503 keeps it down.
        for code in [403, 404, 503] {
            health.saw(http::StatusCode::from_u16(code).unwrap(), "/api/v1/pods");
            assert!(*health.inner.down.borrow(), "{code} ended the outage");
        }
        assert!(!recoveries.has_changed().unwrap());
        health.saw(http::StatusCode::OK, "/api/v1/pods");
        assert!(!*health.inner.down.borrow());
        assert!(recoveries.has_changed().unwrap());
        recoveries.borrow_and_update();
        health.saw(http::StatusCode::CREATED, "/api/v1/pods");
        assert!(
            !recoveries.has_changed().unwrap(),
            "one return, one recovery"
        );
    }

    #[test]
    fn a_500_is_one_requests_until_readyz_fails_too() {
        let health = ApiHealth::default();
        let recoveries = health.recoveries();
        let too_large = http::StatusCode::INTERNAL_SERVER_ERROR;
        health.saw(
            too_large,
            "/apis/test.wasmop.dev/v1alpha1/namespaces/a/hostiles/big/status",
        );
        assert!(
            !*health.inner.down.borrow(),
            "one request's 500 is an outage"
        );
        health.saw(http::StatusCode::OK, "/api/v1/namespaces/a/configmaps/x");
        assert!(
            !recoveries.has_changed().unwrap(),
            "a recovery without an outage"
        );
        // /readyz failing too: the API server's own.
        health.saw(too_large, READYZ);
        assert!(*health.inner.down.borrow());
    }

    #[tokio::test]
    async fn a_500_makes_the_probe_ask_readyz_at_once() {
        let health = ApiHealth::default();
        health.saw(http::StatusCode::INTERNAL_SERVER_ERROR, "/api/v1/x");
        // The permit is stored: a probe that starts later still asks.
        tokio::time::timeout(
            std::time::Duration::from_secs(1),
            health.inner.suspect.notified(),
        )
        .await
        .expect("no /readyz asked after a 500");
    }

    #[tokio::test]
    async fn a_budget_paces_its_own_requests() {
        use tower::ServiceExt as _;
        let budget = crate::settings::ApiBudget::new(20.0, Some(2)).unwrap();
        let counted = |budget: Option<crate::settings::ApiBudget>| Counted {
            metrics: Metrics::new(),
            host: Arc::from("api"),
            controller: Arc::from("g"),
            health: ApiHealth::default(),
            fence: None,
            budget: budget.map(|b| {
                Arc::new(governor::RateLimiter::direct(
                    governor::Quota::with_period(b.period())
                        .unwrap()
                        .allow_burst(std::num::NonZeroU32::new(b.burst).unwrap()),
                ))
            }),
        };
        let inner = tower::service_fn(|_: Request<Body>| async {
            Ok::<_, std::convert::Infallible>(Response::new(()))
        });
        let send = |layer: Counted| async move {
            let mut service = layer.layer(inner);
            let started = std::time::Instant::now();
            for _ in 0..6 {
                let request = Request::get("/api").body(Body::empty()).unwrap();
                service.ready().await.unwrap().call(request).await.unwrap();
            }
            started.elapsed()
        };
        // Two at once, then one every 50 ms: four waits.
        let paced = send(counted(Some(budget))).await;
        assert!(paced >= std::time::Duration::from_millis(190), "{paced:?}");
        let free = send(counted(None)).await;
        assert!(free < std::time::Duration::from_millis(150), "{free:?}");
    }
}
