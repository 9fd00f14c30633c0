//! The misbehaviours, one function each.
//!
//! Several never return: they exist to prove the host contains them (a
//! deadline for `loop`, a memory cap for `memory`, trap handling for the
//! rest). They must not be called natively outside a test that expects it.

use std::collections::BTreeMap;
use std::hint::black_box;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use serde_json::{Value, json};
use wasmop_guest::{Request, Response, Result, meta};

/// Size of the `huge-response` ConfigMap's data: far above any sane
/// response limit (the host's default is a few MiB) yet small enough to
/// build quickly inside the default 64 MiB memory cap.
pub const HUGE_RESPONSE_BYTES: usize = 20 << 20;

/// The namespace the `other-namespace` attack aims at.
pub const FOREIGN_NAMESPACE: &str = "kube-system";

/// A well-formed ConfigMap `<name>-ok` with `{"ok": "true"}`.
pub fn ok_config_map(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: meta::object_meta(format!("{name}-ok"), meta::labels([("app", "hostile")])),
        data: Some([("ok".to_owned(), "true".to_owned())].into()),
        ..ConfigMap::default()
    }
}

/// The well-behaved answer: the ok ConfigMap and `{"ok": true}`.
pub fn none(name: &str) -> Result<Response> {
    Response::new()
        .child(&ok_config_map(name))?
        .status(&json!({"ok": true}))
}

/// Spins forever; only an epoch deadline stops it.
pub fn spin() -> ! {
    let mut counter = 0_u64;
    loop {
        counter = black_box(counter.wrapping_add(1));
    }
}

/// Keeps the CPU busy for `time` by the WASI monotonic clock (which the
/// host grants), as a slow but well-behaved reconcile would.
pub fn busy(time: std::time::Duration) {
    let start = std::time::Instant::now();
    let mut counter = 0_u64;
    while start.elapsed() < time {
        counter = black_box(counter.wrapping_add(1));
    }
}

/// Allocates and fills 1 MiB blocks until allocation fails (which aborts,
/// a trap in wasm).
pub fn exhaust_memory() -> ! {
    let mut hoard: Vec<Vec<u8>> = Vec::new();
    loop {
        let block = vec![0xA5_u8; 1 << 20];
        hoard.push(black_box(block));
        black_box(&hoard);
    }
}

/// Recurses without bound; each frame keeps a buffer alive so the
/// optimiser can neither remove the recursion nor turn it into a loop.
pub fn overflow_stack(depth: u64) -> u64 {
    let frame = black_box([depth; 32]);
    if black_box(depth) == u64::MAX {
        return frame[0];
    }
    overflow_stack(black_box(depth + 1)).wrapping_add(black_box(frame)[7])
}

/// Executes wasm's `unreachable` instruction (a panic natively).
pub fn unreachable() -> ! {
    #[cfg(target_arch = "wasm32")]
    {
        core::arch::wasm32::unreachable()
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        panic!("hostile guest: unreachable (a wasm trap inside the sandbox)")
    }
}

/// A ConfigMap holding [`HUGE_RESPONSE_BYTES`] of data.
///
/// The JSON text is written once, straight into a buffer of the right size:
/// going through `serde_json::Value` would hold three copies of the blob and
/// hit the memory cap before the host ever sees the response, and the point
/// is to test the response-size limit.
pub fn huge_response(name: &str) -> Response {
    let quoted_name = serde_json::Value::from(format!("{name}-huge")).to_string();
    let prefix = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":{quoted_name},"labels":{{"app":"hostile"}}}},"data":{{"blob":""#
    );
    let suffix = r#""}}"#;
    let mut text = String::with_capacity(prefix.len() + HUGE_RESPONSE_BYTES + suffix.len());
    text.push_str(&prefix);
    let chunk = "x".repeat(64 << 10);
    while text.len() + chunk.len() <= prefix.len() + HUGE_RESPONSE_BYTES {
        text.push_str(&chunk);
    }
    text.extend(std::iter::repeat_n(
        'x',
        prefix.len() + HUGE_RESPONSE_BYTES - text.len(),
    ));
    text.push_str(suffix);
    Response::new().raw_child(text)
}

/// A child that is not JSON at all, through the SDK's escape hatch.
pub fn invalid_json() -> Response {
    Response::new().raw_child(r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "#)
}

/// A ConfigMap aimed at [`FOREIGN_NAMESPACE`].
pub fn other_namespace(name: &str) -> Result<Response> {
    let mut config = ok_config_map(name);
    config.metadata.namespace = Some(FOREIGN_NAMESPACE.to_owned());
    Response::new().child(&config)
}

/// A ClusterRoleBinding making every authenticated user cluster-admin: an
/// undeclared, cluster-scoped kind.
pub fn undeclared_kind(name: &str) -> Result<Response> {
    let binding = ClusterRoleBinding {
        metadata: meta::object_meta(format!("{name}-cluster-admin"), Default::default()),
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".to_owned()),
            kind: "ClusterRole".to_owned(),
            name: "cluster-admin".to_owned(),
        },
        subjects: Some(vec![Subject {
            api_group: Some("rbac.authorization.k8s.io".to_owned()),
            kind: "Group".to_owned(),
            name: "system:authenticated".to_owned(),
            namespace: None,
        }]),
    };
    Response::new().child(&binding)
}

/// A ConfigMap claiming to be controlled by some other object.
pub fn spoofed_owner(name: &str) -> Result<Response> {
    let mut config = ok_config_map(name);
    config.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "v1".to_owned(),
        kind: "ConfigMap".to_owned(),
        name: "someone-else".to_owned(),
        uid: "00000000-0000-4000-8000-00000000dead".to_owned(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }]);
    Response::new().child(&config)
}

/// A ConfigMap labelled as belonging to another guest.
pub fn spoofed_label(name: &str) -> Result<Response> {
    let mut config = ok_config_map(name);
    config
        .metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(meta::GUEST_LABEL.to_owned(), "someone-else".to_owned());
    Response::new().child(&config)
}

/// Tries to read a host file and reports what happened in
/// `status.readFile`.
pub fn read_file(name: &str) -> Result<Response> {
    let outcome = match std::fs::read_to_string("/etc/hostname") {
        Ok(text) => format!("ok: {}", text.trim()),
        Err(e) => format!("error: {e}"),
    };
    none_with_status(name, json!({"readFile": outcome}))
}

/// Tries to open a TCP connection to `target` and reports what happened in
/// `status.socket`.
pub fn open_socket(name: &str, target: &str) -> Result<Response> {
    let outcome = match std::net::TcpStream::connect(target) {
        Ok(stream) => format!(
            "ok: connected to {}",
            stream
                .peer_addr()
                .map_or_else(|_| target.to_owned(), |a| a.to_string())
        ),
        Err(e) => format!("error: {e}"),
    };
    none_with_status(name, json!({"socket": outcome}))
}

/// GETs `url` (and, with `follow`, the `location` of a redirect) and reports
/// the outcome in `status.http`: `ok: <status> <body>` or `error: …`.
pub fn http_get(name: &str, url: &str, follow: bool) -> Result<Response> {
    use wasmop_guest::http::{self, Method};
    let mut outcome = http::send(Method::Get, url, None);
    if follow
        && let Ok(answer) = &outcome
        && (300..400).contains(&answer.status)
        && let Some(location) = answer.header("location").map(str::to_owned)
    {
        outcome = http::send(Method::Get, &location, None);
    }
    let text = match outcome {
        Ok(answer) => format!(
            "ok: {} {}",
            answer.status,
            String::from_utf8_lossy(&answer.body)
        ),
        Err(e) => format!("error: {e}"),
    };
    none_with_status(name, json!({"http": text}))
}

/// How large `oversized-status`'s status is: within the guest's
/// response limit (4 MiB) and the API server's request limit (3 MiB), past
/// etcd's (1.5 MiB), so the API server refuses the status write with a 500.
pub const OVERSIZED_STATUS_BYTES: usize = 2 << 20;

/// The ok ConfigMap and a status of [`OVERSIZED_STATUS_BYTES`]: a write
/// that fails for this parent alone.
pub fn oversized_status(name: &str) -> Result<Response> {
    none_with_status(name, json!({"blob": "x".repeat(OVERSIZED_STATUS_BYTES)}))
}

/// What `long-error` fails with: 2 MiB of lines made to look like the
/// host's own log lines (each says `FORGED`).
pub fn long_error() -> String {
    const LINE: &str = "\n2026-01-01T00:00:00.000000Z  INFO wasmop_host: FORGED by the guest";
    let mut message = String::from("hostile guest fails with a long message");
    while message.len() < 2 << 20 {
        message.push_str(LINE);
    }
    message
}

/// The trace context `http-forged-trace` sends: a trace the host never
/// started.
pub const FORGED_TRACEPARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

/// GETs `url` with [`FORGED_TRACEPARENT`] as its `traceparent` and reports
/// the status in `status.http`: `ok: <status>` or `error: …`.
pub fn http_forged_trace(name: &str, url: &str) -> Result<Response> {
    let text = match send_forged(url) {
        Ok(status) => format!("ok: {status}"),
        Err(e) => format!("error: {e}"),
    };
    none_with_status(name, json!({"http": text}))
}

#[cfg(target_arch = "wasm32")]
fn send_forged(url: &str) -> std::result::Result<u16, String> {
    use wasip2::http::outgoing_handler;
    use wasip2::http::types::{Fields, Method, OutgoingBody, OutgoingRequest, Scheme};
    let (scheme, rest) = url.split_once("://").ok_or("not a URL")?;
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let headers = Fields::new();
    headers
        .append("traceparent", FORGED_TRACEPARENT.as_bytes())
        .map_err(|e| format!("{e:?}"))?;
    let request = OutgoingRequest::new(headers);
    let scheme = if scheme == "https" {
        Scheme::Https
    } else {
        Scheme::Http
    };
    request.set_method(&Method::Get).map_err(|()| "method")?;
    request.set_scheme(Some(&scheme)).map_err(|()| "scheme")?;
    request
        .set_authority(Some(authority))
        .map_err(|()| "authority")?;
    request
        .set_path_with_query(Some(if path.is_empty() { "/" } else { path }))
        .map_err(|()| "path")?;
    let body = request.body().map_err(|()| "body")?;
    let future = outgoing_handler::handle(request, None).map_err(|e| format!("{e:?}"))?;
    OutgoingBody::finish(body, None).map_err(|e| format!("{e:?}"))?;
    future.subscribe().block();
    match future.get() {
        Some(Ok(Ok(response))) => Ok(response.status()),
        Some(Ok(Err(code))) => Err(format!("{code:?}")),
        _ => Err("no response".to_owned()),
    }
}

#[cfg(not(target_arch = "wasm32"))]
fn send_forged(_url: &str) -> std::result::Result<u16, String> {
    Err("not wasm".to_owned())
}

/// GETs `url` `times` times and reports in `status.http` how many were
/// answered and how many refused.
pub fn http_flood(name: &str, url: &str, times: usize) -> Result<Response> {
    use wasmop_guest::http::{self, HttpError, Method};
    let (mut answered, mut refused) = (0, 0);
    for _ in 0..times {
        match http::send(Method::Get, url, None) {
            Ok(_) => answered += 1,
            Err(HttpError::Refused(_)) => refused += 1,
            Err(_) => {}
        }
    }
    none_with_status(
        name,
        json!({"http": format!("ok: {answered} refused: {refused}")}),
    )
}

/// Builds 8 KiB header maps through `wasi:http` and keeps them all, until
/// the host refuses one; reports how many it kept in `status.hoard`.
pub fn http_hoard(name: &str) -> Result<Response> {
    #[cfg(target_arch = "wasm32")]
    let outcome = {
        use wasip2::http::types::Fields;
        let value = vec![b'x'; 8 << 10];
        let mut kept = Vec::new();
        let mut error = String::from("none refused");
        for _ in 0..100_000 {
            let fields = Fields::new();
            if let Err(e) = fields.append("x-hoard", &value) {
                error = format!("{e:?}");
                break;
            }
            kept.push(fields);
        }
        format!("{} kept; {error}", kept.len())
    };
    #[cfg(not(target_arch = "wasm32"))]
    let outcome = String::from("0 kept; not wasm");
    none_with_status(name, json!({"hoard": outcome}))
}

/// Reports how many environment variables and arguments the guest sees in
/// `status.envVars` and `status.args`.
pub fn env(name: &str) -> Result<Response> {
    none_with_status(
        name,
        json!({
            "envVars": std::env::vars().count(),
            "args": std::env::args().count(),
        }),
    )
}

fn none_with_status(name: &str, status: serde_json::Value) -> Result<Response> {
    Response::new().child(&ok_config_map(name))?.status(&status)
}

/// Status `{"related": [...], "observedSecrets": [...]}`: every related
/// object and every observed child Secret exactly as the host handed them
/// over, so a test sees whether a Secret value reached the guest.
pub fn echo_related(request: &Request) -> Result<Response> {
    let secrets: Vec<&Value> = request
        .observed()
        .filter(|o| o["kind"] == "Secret")
        .collect();
    let related: Vec<&Value> = request.related().collect();
    Response::new().status(&json!({
        "related": related,
        "observedSecrets": secrets,
    }))
}
