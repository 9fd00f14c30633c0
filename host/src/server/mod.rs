//! The host's endpoints, one file per family: metrics (`metrics.rs`), the
//! health probes (`probes.rs`, over the state `health.rs` keeps) and the
//! HTTPS webhooks (`webhooks.rs`, serving what `webhook/` answers).
//!
//! Addresses are written as controller-runtime writes them: `:8080` (every
//! interface), `127.0.0.1:8080`, or `0` to turn the endpoint off.

pub mod health;
pub mod metrics;
pub mod probes;
pub mod webhooks;

use std::net::SocketAddr;

use axum::Router;

/// Why an endpoint could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The address is not `:port`, `host:port` or `0`.
    #[error("invalid bind address {0:?} (use :8080, 127.0.0.1:8080 or 0 to turn it off)")]
    Address(String),
    /// The address cannot be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

/// Parses a bind address: `None` for `0` (off).
pub fn parse_bind(text: &str) -> Result<Option<SocketAddr>, Error> {
    let text = text.trim();
    if text == "0" {
        return Ok(None);
    }
    let full = if text.starts_with(':') {
        format!("0.0.0.0{text}")
    } else {
        text.to_owned()
    };
    full.parse()
        .map(Some)
        .map_err(|_| Error::Address(text.to_owned()))
}

/// Binds `addr` and serves `router` on it until the process ends; returns
/// the address bound (the port, when `addr` asked for port 0).
pub async fn serve(addr: SocketAddr, router: Router) -> Result<SocketAddr, Error> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| Error::Bind { addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| Error::Bind { addr, source })?;
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router).await {
            tracing::error!(%bound, "HTTP endpoint stopped: {e}");
        }
    });
    Ok(bound)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bind_addresses_read_as_controller_runtime_writes_them() {
        assert_eq!(parse_bind("0").unwrap(), None);
        assert_eq!(
            parse_bind(":8080").unwrap(),
            Some("0.0.0.0:8080".parse().unwrap())
        );
        assert_eq!(
            parse_bind("127.0.0.1:9").unwrap(),
            Some("127.0.0.1:9".parse().unwrap())
        );
        assert!(parse_bind("eight").is_err());
    }
}
