//! What the host tells about itself: Prometheus metrics ([`metrics`]) and
//! structured logs ([`logs`]).

pub mod logs;
pub mod metrics;
mod process;
mod queue;

pub use metrics::Metrics;
pub use queue::QueueTracker;
