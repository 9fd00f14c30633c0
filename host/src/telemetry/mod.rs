//! What the host tells about itself: Prometheus metrics ([`metrics`]),
//! structured logs ([`logs`]) and OTLP traces of reconciles ([`traces`]).

pub mod logs;
pub mod metrics;
mod process;
mod queue;
pub mod traces;

pub use metrics::Metrics;
pub use queue::QueueTracker;
