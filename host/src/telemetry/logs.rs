//! The host's log: text for people, JSON lines for log pipelines; both
//! carry the fields of the span a line was written in (a reconcile's guest,
//! object, generation and id).

use tracing_subscriber::EnvFilter;

/// How log lines are written (`--log-format`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line, with the current span's fields under
    /// `span`.
    Json,
}

/// Installs the global subscriber: `WASMOP_LOG` (an `EnvFilter`) picks the
/// levels, `info` with kube-runtime's chatter at `warn` by default.
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_env("WASMOP_LOG")
        .unwrap_or_else(|_| EnvFilter::new("info,kube_runtime=warn"));
    use std::io::IsTerminal as _;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => builder
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .init(),
    }
}
