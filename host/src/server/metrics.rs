//! `GET /metrics`.

use std::sync::Arc;

use axum::Router;
use axum::http::header::CONTENT_TYPE;
use axum::routing::get;
use prometheus_client::registry::Registry;

use crate::telemetry::Metrics;

/// `GET /metrics`: every metric in the Prometheus text format.
pub fn router(registry: Registry) -> Router {
    let registry = Arc::new(registry);
    Router::new().route(
        "/metrics",
        get(move || {
            let registry = registry.clone();
            async move {
                (
                    [(
                        CONTENT_TYPE,
                        prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
                    )],
                    Metrics::render(&registry),
                )
            }
        }),
    )
}
