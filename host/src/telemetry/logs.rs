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
        LogFormat::Text => {
            let ansi = std::io::stderr().is_terminal();
            log.with_ansi(ansi)
                .with_writer(move || OneLine {
                    inner: std::io::stderr(),
                    ansi,
                })
                .boxed()
        }
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

/// The text log's writer: one record, one line. A record is written in one
/// call; a line break or control character inside it (a guest's error
/// message quoted in a host line, a guest's own log line) is escaped, so no
/// text can forge a line of its own. The escape character is kept when the
/// log colours a terminal.
struct OneLine<W> {
    inner: W,
    ansi: bool,
}

impl<W: std::io::Write> std::io::Write for OneLine<W> {
    fn write(&mut self, record: &[u8]) -> std::io::Result<usize> {
        self.inner.write_all(&one_line(record, self.ansi))?;
        Ok(record.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// `record` with its control characters escaped but the final newline.
fn one_line(record: &[u8], ansi: bool) -> std::borrow::Cow<'_, [u8]> {
    let body = record.strip_suffix(b"\n").unwrap_or(record);
    let escaped = |b: u8| b.is_ascii_control() && b != b'\t' && !(ansi && b == 0x1b);
    if !body.iter().copied().any(escaped) {
        return std::borrow::Cow::Borrowed(record);
    }
    let mut out = Vec::with_capacity(record.len() + 16);
    for &b in body {
        match b {
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b if escaped(b) => out.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
            b => out.push(b),
        }
    }
    if body.len() < record.len() {
        out.push(b'\n');
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_one_line_whatever_its_text_holds() {
        let record = b"WARN reconcile failed: boom\nFORGED INFO all is well\r\x1b[31m\n";
        assert_eq!(
            &*one_line(record, false),
            &b"WARN reconcile failed: boom\\nFORGED INFO all is well\\r\\x1b[31m\n"[..]
        );
        assert_eq!(
            &*one_line(b"\x1b[2mdim\x1b[0m ok\n", true),
            &b"\x1b[2mdim\x1b[0m ok\n"[..]
        );
        let plain = b"INFO nothing to escape\tat all\n";
        assert!(matches!(
            one_line(plain, false),
            std::borrow::Cow::Borrowed(_)
        ));
    }
}
