//! `GET /healthz` and `GET /readyz`.

use std::sync::Arc;

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;

use super::health::Health;
use crate::leader::Leadership;
use crate::runtime::Runtime;

/// What the probes look at.
#[derive(Clone)]
pub struct Probes {
    /// Guests, caches and the guest list.
    pub health: Health,
    /// Whether this host leads.
    pub leadership: Leadership,
    /// Only the leader is ready (`--readyz-requires-leader`).
    pub requires_leader: bool,
    /// The wasm runtime, whose epoch ticker enforces deadlines.
    pub runtime: Runtime,
}

/// `/healthz` and `/readyz`: 200 `ok`, or 500 with what is wrong.
pub fn router(probes: Probes) -> Router {
    let probes = Arc::new(probes);
    let live = probes.clone();
    Router::new()
        .route(
            "/healthz",
            get(move || {
                let probes = live.clone();
                async move {
                    if probes.runtime.ticker_alive() {
                        (StatusCode::OK, "ok".to_owned())
                    } else {
                        (
                            StatusCode::INTERNAL_SERVER_ERROR,
                            "the epoch ticker stopped: guest deadlines are not enforced".to_owned(),
                        )
                    }
                }
            }),
        )
        .route(
            "/readyz",
            get(move || {
                let probes = probes.clone();
                async move {
                    if probes.requires_leader && !probes.leadership.is_leader() {
                        return (
                            StatusCode::INTERNAL_SERVER_ERROR,
                            "not the leader".to_owned(),
                        );
                    }
                    match probes.health.ready() {
                        Ok(()) => (StatusCode::OK, "ok".to_owned()),
                        Err(why) => (StatusCode::INTERNAL_SERVER_ERROR, why),
                    }
                }
            }),
        )
}
