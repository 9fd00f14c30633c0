//! The host's log: text for people, JSON lines for log pipelines; both
//! carry the fields of the span a line was written in (a reconcile's guest,
//! object, generation and id). With traces on, the same spans also go to
//! the OTLP exporter ([`super::traces`]).

use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer as _};

use super::traces::{TARGET, Traces};

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
/// levels of the log, `info` with kube-runtime's chatter at `warn` by
/// default; with `traces`, the host's spans at `info` (and the spans made
/// for traces) are exported too.
pub fn init(format: LogFormat, traces: Option<&Traces>) {
    let filter = EnvFilter::try_from_env("WASMOP_LOG")
        .unwrap_or_else(|_| EnvFilter::new("info,kube_runtime=warn"))
        .add_directive(format!("{TARGET}=off").parse().expect("a valid directive"));
    use std::io::IsTerminal as _;
    let log = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let log = match format {
        LogFormat::Text => log.with_ansi(std::io::stderr().is_terminal()).boxed(),
        LogFormat::Json => log
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .boxed(),
    };
    let exported = traces.map(|traces| {
        tracing_opentelemetry::layer()
            .with_tracer(traces.tracer())
            .with_filter(
                Targets::new()
                    .with_target("wasmop_host", LevelFilter::INFO)
                    .with_target(TARGET, LevelFilter::INFO),
            )
    });
    tracing_subscriber::registry()
        .with(log.with_filter(filter))
        .with(exported)
        .init();
}
