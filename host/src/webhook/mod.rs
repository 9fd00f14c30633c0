//! Admission and conversion served by guests.
//!
//! A guest whose module exports `admit` gets a mutating and a validating
//! webhook for its primary kind; one that exports `convert` becomes its
//! CRD's conversion webhook. The host serves both over HTTPS
//! (`server/webhooks.rs`, on the listener and TLS configuration
//! [`Webhooks::start`] returns) with a certificate from a Secret or issued
//! at start (`tls.rs`), writes the webhook configurations and the CRD's conversion
//! (`configs.rs`), and checks every verdict and converted object before the
//! API server sees it (`admission.rs`, `conversion.rs`). Each request is
//! answered by the guest's current module version: a hot swap changes
//! verdicts for the requests that arrive after it.
//!
//! Webhooks are served only with `--webhook-host`: without an address the
//! API server can reach, nothing is registered.

pub mod admission;
mod configs;
pub mod conversion;
pub mod offline;
mod tls;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

use anyhow::Context;
use kube::core::ApiResource;

pub use configs::{config_name, timeout_seconds};
pub use tls::Certificate;

use crate::leader::Leadership;
use crate::protected::{ProtectedObjects, ProtectedRef};
use crate::rollout::GuestSlot;
use crate::settings::FailurePolicy;
use crate::telemetry::Metrics;

/// How often the certificate's Secret is read again.
const CERTIFICATE_CHECK: std::time::Duration = std::time::Duration::from_secs(60);

/// A listener on `addr` that other processes may bind too
/// (`SO_REUSEPORT`): replicas on one machine share one address, which the
/// API server's registration names, and the kernel hands each connection
/// to a live one (in a cluster the webhook Service does the same).
fn listen_shared(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.set_reuseport(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

/// The bound address webhooks are served on, and its TLS configuration,
/// whose certificate follows the Secret.
pub struct Listening {
    /// The listener, bound and listening.
    pub listener: tokio::net::TcpListener,
    /// The server's TLS configuration.
    pub tls: Arc<rustls::ServerConfig>,
}

/// Where and how webhooks are served.
#[derive(Clone, Debug)]
pub struct Config {
    /// The address to listen on.
    pub bind: SocketAddr,
    /// The host (and port) the API server reaches this process at:
    /// `--webhook-host`. Without a port, the bound port.
    pub host: String,
    /// The Secret with the serving certificate, `namespace/name`; none to
    /// issue one at start.
    pub cert_secret: Option<(String, String)>,
}

/// One guest as its webhooks serve it.
#[derive(Clone, Debug)]
pub struct Served {
    /// The guest's module versions, swapped in place.
    pub slot: GuestSlot,
    /// The primary kind's resource (group, version, plural).
    pub primary: ApiResource,
    /// The namespaces the guest watches; empty for all.
    pub namespaces: Vec<String>,
    /// What a failed admission call answers.
    pub failure_policy: FailurePolicy,
    /// Webhook calls of this guest that may run at once (its
    /// concurrency); a request waits for one at most the guest's deadline.
    pub permits: Arc<tokio::sync::Semaphore>,
}

/// The guests whose webhooks this process serves. Cheap to clone.
#[derive(Clone)]
pub struct Webhooks {
    inner: Arc<Inner>,
}

struct Inner {
    guests: RwLock<BTreeMap<String, Served>>,
    changed: tokio::sync::watch::Sender<u64>,
    /// `https://<host>:<port>`.
    base_url: String,
    certificate: RwLock<Certificate>,
    resolver: Arc<tls::Resolver>,
    metrics: Arc<Metrics>,
    protected: ProtectedObjects,
}

impl Webhooks {
    /// Loads or issues the certificate, binds `config.bind` and keeps the
    /// webhook configurations and CRD conversions of the served guests
    /// written while this process leads (`client` writes them). The
    /// certificate's Secret and the configurations join `protected`: no
    /// guest may write them. Returns the listener the endpoint is served on
    /// (`server::webhooks::spawn`).
    pub async fn start(
        config: Config,
        client: kube::Client,
        leadership: Leadership,
        metrics: Arc<Metrics>,
        protected: ProtectedObjects,
    ) -> anyhow::Result<(Self, Listening)> {
        let listener = listen_shared(config.bind)
            .with_context(|| format!("cannot listen on --webhook-bind-address {}", config.bind))?;
        let bound = listener.local_addr()?;
        let (host, port) = split_host(&config.host, bound.port())?;
        if let Some((namespace, name)) = &config.cert_secret {
            protected.set(
                "webhook-certificate",
                [ProtectedRef::namespaced("", "Secret", namespace, name)],
            );
        }
        let certificate = match &config.cert_secret {
            Some((namespace, name)) => {
                Certificate::from_secret(client.clone(), namespace, name, &host).await?
            }
            None => Certificate::self_issued(&host)?,
        };
        let resolver = tls::Resolver::new(certificate.certified_key()?);
        let server = resolver.server_config()?;
        let host_in_url = if host.contains(':') {
            format!("[{host}]")
        } else {
            host.clone()
        };
        let webhooks = Self {
            inner: Arc::new(Inner {
                guests: RwLock::default(),
                changed: tokio::sync::watch::channel(0).0,
                base_url: format!("https://{host_in_url}:{port}"),
                certificate: RwLock::new(certificate),
                resolver,
                metrics,
                protected,
            }),
        };
        tokio::spawn(configs::keep_written(
            webhooks.clone(),
            client.clone(),
            leadership,
        ));
        if let Some((namespace, name)) = config.cert_secret.clone() {
            tokio::spawn(
                webhooks
                    .clone()
                    .follow_secret(client, namespace, name, host),
            );
        }
        tracing::info!(%bound, url = %webhooks.inner.base_url, self_issued = config.cert_secret.is_none(), "serving webhooks on /mutate, /validate and /convert");
        Ok((
            webhooks,
            Listening {
                listener,
                tls: server,
            },
        ))
    }

    /// Reads the certificate's Secret every minute and serves a renewed
    /// certificate from the next handshake on (its CA rewritten into the
    /// configurations).
    async fn follow_secret(
        self,
        client: kube::Client,
        namespace: String,
        name: String,
        host: String,
    ) {
        loop {
            tokio::time::sleep(CERTIFICATE_CHECK).await;
            let read = Certificate::from_secret(client.clone(), &namespace, &name, &host).await;
            let renewed = match read {
                Ok(c) if c != *self.inner.certificate.read().expect("certificate lock") => c,
                Ok(_) => continue,
                Err(e) => {
                    tracing::warn!("reading the webhook certificate's Secret: {e:#}");
                    continue;
                }
            };
            match renewed.certified_key() {
                Ok(key) => {
                    self.inner.resolver.replace(key);
                    *self.inner.certificate.write().expect("certificate lock") = renewed;
                    tracing::info!(secret = %format!("{namespace}/{name}"), "serving the renewed webhook certificate");
                    self.changed();
                }
                Err(e) => tracing::warn!(
                    "the renewed webhook certificate is unusable, the old one stays: {e:#}"
                ),
            }
        }
    }

    /// The CA bundle the API server trusts this host's certificate by.
    fn ca_pem(&self) -> String {
        self.inner
            .certificate
            .read()
            .expect("certificate lock")
            .ca_pem
            .clone()
    }

    /// Protects the configurations of the served guests.
    fn protect(&self) {
        let names: Vec<String> = self
            .inner
            .guests
            .read()
            .expect("webhook guests lock")
            .keys()
            .map(|n| config_name(n))
            .collect();
        self.inner.protected.set(
            "webhook-configurations",
            names.iter().flat_map(|name| {
                [
                    ProtectedRef::cluster(
                        "admissionregistration.k8s.io",
                        "MutatingWebhookConfiguration",
                        name,
                    ),
                    ProtectedRef::cluster(
                        "admissionregistration.k8s.io",
                        "ValidatingWebhookConfiguration",
                        name,
                    ),
                ]
            }),
        );
    }

    /// Serves `served` for guest `name` (new, or with new settings).
    pub fn set(&self, name: &str, served: Served) {
        self.inner
            .guests
            .write()
            .expect("webhook guests lock")
            .insert(name.to_owned(), served);
        self.protect();
        self.changed();
    }

    /// Stops serving guest `name`; its webhook configurations go.
    pub fn remove(&self, name: &str) {
        let removed = self
            .inner
            .guests
            .write()
            .expect("webhook guests lock")
            .remove(name);
        if removed.is_some() {
            self.protect();
            self.changed();
        }
    }

    /// The guest's module version changed: its exports may have.
    pub fn changed(&self) {
        self.inner.changed.send_modify(|n| *n += 1);
    }

    /// The guest `name` as its webhooks serve it, if they do.
    pub fn served(&self, name: &str) -> Option<Served> {
        self.inner
            .guests
            .read()
            .expect("webhook guests lock")
            .get(name)
            .cloned()
    }

    fn snapshot(&self) -> BTreeMap<String, Served> {
        self.inner
            .guests
            .read()
            .expect("webhook guests lock")
            .clone()
    }

    /// `path` when `name` is served, else `/unknown`: the metric label
    /// stays bounded whatever paths a client sends.
    pub fn known_path(&self, name: &str, path: String) -> String {
        if self.served(name).is_some() {
            path
        } else {
            "/unknown".into()
        }
    }

    /// The metrics webhook requests are counted in.
    pub fn metrics(&self) -> &Metrics {
        &self.inner.metrics
    }

    /// The URL of `path` on this host.
    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.inner.base_url)
    }
}

/// `host` or `host:port` (`[v6]:port`) of `--webhook-host`, the port
/// defaulting to `bound`.
fn split_host(text: &str, bound: u16) -> anyhow::Result<(String, u16)> {
    let text = text.trim();
    anyhow::ensure!(!text.is_empty(), "--webhook-host is empty");
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok((addr.ip().to_string(), addr.port()));
    }
    if text.parse::<std::net::IpAddr>().is_ok() {
        return Ok((text.to_owned(), bound));
    }
    let (host, port) = match text.rsplit_once(':') {
        Some((host, port)) => {
            let port = port
                .parse()
                .with_context(|| format!("--webhook-host {text:?}: {port:?} is not a port"))?;
            (host, port)
        }
        None => (text, bound),
    };
    crate::validate::names::dns_subdomain(host).map_err(|why| {
        anyhow::anyhow!("--webhook-host {text:?} is not an IP address or a DNS name: {why}")
    })?;
    Ok((host.to_owned(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_webhook_host_takes_a_port_or_the_bound_one() {
        assert_eq!(
            split_host("127.0.0.1", 9443).unwrap(),
            ("127.0.0.1".into(), 9443)
        );
        assert_eq!(
            split_host("127.0.0.1:443", 9443).unwrap(),
            ("127.0.0.1".into(), 443)
        );
        assert_eq!(split_host("::1", 9443).unwrap(), ("::1".into(), 9443));
        assert_eq!(
            split_host("[::1]:8443", 9443).unwrap(),
            ("::1".into(), 8443)
        );
        assert_eq!(
            split_host("wasmop-webhook.wasmop-system.svc:443", 9443).unwrap(),
            ("wasmop-webhook.wasmop-system.svc".into(), 443)
        );
        assert_eq!(split_host("svc", 1).unwrap(), ("svc".into(), 1));
        assert!(split_host("svc:port", 1).is_err());
        assert!(split_host(" ", 1).is_err());
        assert!(split_host("not a host!", 1).is_err());
        assert!(split_host("https://svc", 1).is_err());
    }
}
