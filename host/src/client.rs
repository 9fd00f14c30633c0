//! The host's API clients: one per guest, each telling the API server who
//! it is.
//!
//! Every request carries the User-Agent `wasmop/<version>`, and the
//! requests made for a guest `wasmop/<version> guest/<name>`, so the API
//! server's audit log and metrics tell the host's requests apart, and each
//! guest's from the others'. Each guest's client has its own connection
//! pool, so one guest's slow requests do not queue another's.

use http::{HeaderName, HeaderValue};

/// The User-Agent of the host's own requests.
pub fn user_agent() -> String {
    format!("wasmop/{}", env!("CARGO_PKG_VERSION"))
}

/// Builds the host's clients from one configuration.
#[derive(Clone)]
pub struct Clients {
    config: kube::Config,
    host: kube::Client,
}

impl Clients {
    /// Clients for `config`; fails if it cannot make one.
    pub fn new(config: kube::Config) -> kube::Result<Self> {
        let host = build(&config, user_agent())?;
        Ok(Self { config, host })
    }

    /// The client of the host's own requests (the guest list, discovery).
    pub fn host(&self) -> kube::Client {
        self.host.clone()
    }

    /// A client for the requests made for guest `name`.
    pub fn for_guest(&self, name: &str) -> kube::Result<kube::Client> {
        build(&self.config, format!("{} guest/{name}", user_agent()))
    }
}

impl std::fmt::Debug for Clients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Clients")
            .field("cluster_url", &self.config.cluster_url)
            .finish_non_exhaustive()
    }
}

fn build(config: &kube::Config, agent: String) -> kube::Result<kube::Client> {
    let mut config = config.clone();
    config
        .headers
        .retain(|(name, _)| name != http::header::USER_AGENT);
    let value =
        HeaderValue::from_str(&agent).unwrap_or_else(|_| HeaderValue::from_static("wasmop"));
    config
        .headers
        .push((HeaderName::from_static("user-agent"), value));
    kube::Client::try_from(config)
}
