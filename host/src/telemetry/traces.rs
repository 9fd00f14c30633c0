//! Traces of reconciles over OTLP (`--otlp-endpoint`, or the standard
//! `OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`),
//! off by default.
//!
//! Each reconcile is a trace: the `reconcile` span (attributes `guest`,
//! `object`, `generation`, `id`, `queue_wait_ms`) with the guest call and every API request
//! the reconcile made as children, and the guest's outbound HTTP requests
//! under the guest call, each carrying the W3C `traceparent` of its span.
//! Sampling follows the standard `OTEL_TRACES_SAMPLER` and
//! `OTEL_TRACES_SAMPLER_ARG`; the service name is `wasmop` unless
//! `OTEL_SERVICE_NAME` says otherwise.
//!
//! The spans only traces need are under the target [`TARGET`], which the
//! log leaves out: a log line keeps the reconcile span's fields.

use anyhow::Context as _;
use opentelemetry::propagation::TextMapPropagator as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// The target of the spans made for traces only.
pub const TARGET: &str = "wasmop::trace";

/// The OTLP exporter of a running host. Dropping it does not flush:
/// [`Traces::shutdown`] does.
#[derive(Debug)]
pub struct Traces {
    provider: SdkTracerProvider,
}

impl Traces {
    /// The exporter, when `endpoint` (a base URL: `/v1/traces` is added
    /// unless it has a path) or the standard variables ask for one.
    pub fn from_settings(endpoint: Option<&str>) -> anyhow::Result<Option<Self>> {
        let from_env = [
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        ]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|v| !v.is_empty()));
        let mut builder = opentelemetry_otlp::SpanExporter::builder().with_http();
        match endpoint {
            Some(base) => builder = builder.with_endpoint(traces_url(base)?),
            None if from_env => {}
            None => return Ok(None),
        }
        let exporter = builder
            .build()
            .context("setting up the OTLP trace exporter")?;
        let mut resource = opentelemetry_sdk::Resource::builder();
        if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
            resource = resource.with_service_name("wasmop");
        }
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource.build())
            .build();
        Ok(Some(Self { provider }))
    }

    /// The tracer the `tracing` layer exports through.
    pub fn tracer(&self) -> opentelemetry_sdk::trace::Tracer {
        self.provider.tracer("wasmop")
    }

    /// Exports what is buffered and stops.
    pub fn shutdown(self) {
        if let Err(e) = self.provider.shutdown() {
            eprintln!("wasmop: exporting the last traces failed: {e}");
        }
    }
}

/// `base` as the URL of the traces signal.
fn traces_url(base: &str) -> anyhow::Result<String> {
    let url: http::Uri = base
        .parse()
        .with_context(|| format!("--otlp-endpoint {base:?} is not a URL"))?;
    anyhow::ensure!(
        matches!(url.scheme_str(), Some("http" | "https")) && url.host().is_some(),
        "--otlp-endpoint {base:?} is not an http(s) URL"
    );
    Ok(match url.path() {
        "" | "/" => format!("{}/v1/traces", base.trim_end_matches('/')),
        _ => base.to_owned(),
    })
}

/// Writes the W3C trace context of `span` into `headers` (`traceparent`,
/// and `tracestate` when there is one), replacing what was there; leaves
/// `headers` alone when `span` is not traced.
pub fn inject(span: &tracing::Span, headers: &mut http::HeaderMap) {
    let context = span.context();
    {
        use opentelemetry::trace::TraceContextExt as _;
        if !context.span().span_context().is_valid() {
            return;
        }
    }
    let mut fields = std::collections::HashMap::new();
    TraceContextPropagator::new().inject_context(&context, &mut fields);
    for (name, value) in fields {
        if let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(name.as_bytes()),
            http::HeaderValue::from_str(&value),
        ) {
            headers.insert(name, value);
        }
    }
}

/// The span of one API request, a child of the current span; disabled
/// (free) when there is none (watches) or traces are off.
pub fn api_request(method: &http::Method, uri: &http::Uri) -> tracing::Span {
    if tracing::Span::current().is_none() {
        return tracing::Span::none();
    }
    tracing::info_span!(
        target: TARGET,
        "api request",
        otel.name = %format_args!("{method} {}", uri.path()),
        otel.kind = "client",
        http.request.method = %method,
        url.path = uri.path(),
        http.response.status_code = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    )
}

/// Records the answer of a request on its span.
pub fn answered(span: &tracing::Span, status: Option<http::StatusCode>) {
    match status {
        Some(status) => {
            span.record("http.response.status_code", status.as_u16());
            if status.is_server_error() || status.is_client_error() {
                span.record("otel.status_code", "ERROR");
            }
        }
        None => {
            span.record("otel.status_code", "ERROR");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_base_url_gets_the_traces_path_and_a_full_one_is_kept() {
        assert_eq!(
            traces_url("http://collector:4318").unwrap(),
            "http://collector:4318/v1/traces"
        );
        assert_eq!(
            traces_url("http://collector:4318/").unwrap(),
            "http://collector:4318/v1/traces"
        );
        assert_eq!(
            traces_url("https://otel.example/custom/v1/traces").unwrap(),
            "https://otel.example/custom/v1/traces"
        );
        assert!(traces_url("collector:4318").is_err());
        assert!(traces_url("ftp://collector").is_err());
    }

    #[test]
    fn an_untraced_span_injects_nothing() {
        let mut headers = http::HeaderMap::new();
        headers.insert("traceparent", http::HeaderValue::from_static("guest's own"));
        inject(&tracing::Span::none(), &mut headers);
        assert_eq!(headers["traceparent"], "guest's own");
    }
}
