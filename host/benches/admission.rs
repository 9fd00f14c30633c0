//! Admission latency as the API server sees it: the cache-operator's
//! `admit` served by the wasmop host (a fresh wasm instance per call) against
//! a native Rust webhook with the same logic (the same crate's `admit`,
//! compiled natively, behind the same HTTP, TLS and AdmissionReview code),
//! on one real control plane, measured side by side.
//!
//! Three Cache kinds of their own groups: one admitted by the host's guest,
//! one by the native webhook, one by nobody (the floor). Creates are
//! interleaved across the three, one at a time. Printed:
//! - from the API server's `apiserver_admission_webhook_admission_duration_seconds`:
//!   per webhook, the count and mean (its sum over its count: exact) and
//!   p50/p99 interpolated in its buckets (coarse: 5 ms, 25 ms, …);
//! - from the client: p50/p99 of a whole create per kind, and what the two
//!   webhooks add over the floor.
//!
//! Target: wasm / native ≤ 1.5. Run with `cargo xtask bench admission`.

#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::Path;
use axum::response::IntoResponse;
use axum::routing::post;
use base64::Engine as _;
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::admission::{AdmissionRequest, AdmissionReview};
use serde_json::json;
use wasmop_guest::Admission as _;
use wasmop_host::webhook::{Certificate, admission};
use wasmop_testenv::TestEnv;

/// Creates per kind (after the warm-up).
const N: usize = 300;
/// Creates per kind before measuring (connections, caches).
const WARMUP: usize = 20;

const WASM: &str = "wasm.bench.example.com";
const NATIVE: &str = "native.bench.example.com";
const FLOOR: &str = "floor.bench.example.com";

/// The native webhook: the same decoding, verdict checks and answer as the
/// host's, around the cache-operator's `admit` compiled natively.
async fn native_admit(
    Path(verb): Path<String>,
    body: axum::body::Bytes,
) -> axum::response::Response {
    let review: AdmissionReview<DynamicObject> = serde_json::from_slice(&body).expect("review");
    let request: AdmissionRequest<DynamicObject> = review.try_into().expect("request");
    let mutating = verb == "mutate";
    let wire = admission::review(&request, mutating, None);
    let verdict = cache_operator::CacheOperator::admit(&wasmop_guest::Review::from_wire(wire));
    let bounds = admission::PatchBounds::of(&wasmop_host::runtime::Limits::default());
    let response = admission::answer(&request, verdict, mutating, bounds).expect("a valid verdict");
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        serde_json::to_vec(&response.into_review()).expect("json"),
    )
        .into_response()
}

/// Serves the native webhook over TLS on a free local port.
async fn serve_native(certificate: &Certificate) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let acceptor = tokio_rustls::TlsAcceptor::from(certificate.server_config().expect("tls"));
    let router = Router::new().route("/{verb}", post(native_admit));
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let (acceptor, router) = (acceptor.clone(), router.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(stream).await else {
                    return;
                };
                let service = hyper_util::service::TowerToHyperService::new(router);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    addr
}

/// The native webhook's configurations, as the host writes its own.
async fn register_native(client: &Client, addr: SocketAddr, ca: &str, ns: &str) {
    for (kind, verb) in [
        ("MutatingWebhookConfiguration", "mutate"),
        ("ValidatingWebhookConfiguration", "validate"),
    ] {
        let mut webhook = json!({
            "name": format!("{verb}.native.bench.example.com"),
            "admissionReviewVersions": ["v1"], "sideEffects": "None", "failurePolicy": "Fail",
            "matchPolicy": "Equivalent", "timeoutSeconds": 2,
            "clientConfig": {"url": format!("https://{addr}/{verb}"), "caBundle": ca},
            "rules": [{"apiGroups": [NATIVE], "apiVersions": ["v1alpha1"], "resources": ["caches"],
                "operations": ["CREATE", "UPDATE"], "scope": "Namespaced"}],
            "namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": [ns]}]},
        });
        if verb == "mutate" {
            webhook["reinvocationPolicy"] = json!("IfNeeded");
        }
        let object = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
            "metadata": {"name": "native-bench"}, "webhooks": [webhook]});
        let ar = kube::core::ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk(
            "admissionregistration.k8s.io",
            "v1",
            kind,
        ));
        Api::<DynamicObject>::all_with(client.clone(), &ar)
            .patch(
                "native-bench",
                &PatchParams::apply("bench").force(),
                &Patch::Apply(&object),
            )
            .await
            .expect("native webhook configuration");
    }
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * q).round() as usize]
}

/// One webhook's series of the API server's admission histogram.
#[derive(Default, Debug)]
struct Histogram {
    buckets: Vec<(f64, f64)>,
    sum: f64,
    count: f64,
}

impl Histogram {
    fn mean(&self) -> f64 {
        self.sum / self.count.max(1.0)
    }

    /// `q` interpolated linearly inside the bucket it falls in.
    fn quantile(&self, q: f64) -> f64 {
        let target = q * self.count;
        let mut previous = (0.0, 0.0);
        for &(le, cumulative) in &self.buckets {
            if cumulative >= target {
                if le.is_infinite() {
                    return previous.0;
                }
                let share = if cumulative > previous.1 {
                    (target - previous.1) / (cumulative - previous.1)
                } else {
                    0.0
                };
                return previous.0 + (le - previous.0) * share;
            }
            previous = (le, cumulative);
        }
        previous.0
    }
}

fn label<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let start = line.find(&format!("{key}=\""))? + key.len() + 2;
    let end = line[start..].find('"')? + start;
    Some(&line[start..end])
}

/// `apiserver_admission_webhook_admission_duration_seconds` by webhook
/// name (created objects, not rejected).
fn admission_histograms(metrics: &str) -> BTreeMap<String, Histogram> {
    let mut out: BTreeMap<String, Histogram> = BTreeMap::new();
    let prefix = "apiserver_admission_webhook_admission_duration_seconds";
    for line in metrics.lines().filter(|l| l.starts_with(prefix)) {
        let (Some(name), Some(value)) = (label(line, "name"), line.rsplit(' ').next()) else {
            continue;
        };
        if label(line, "operation") != Some("CREATE") || label(line, "rejected") != Some("false") {
            continue;
        }
        let value: f64 = value.parse().unwrap_or(0.0);
        let histogram = out.entry(name.to_owned()).or_default();
        if line.starts_with(&format!("{prefix}_bucket")) {
            let le = label(line, "le").unwrap_or("+Inf");
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().unwrap_or(0.0)
            };
            histogram.buckets.push((le, value));
        } else if line.starts_with(&format!("{prefix}_sum")) {
            histogram.sum += value;
        } else if line.starts_with(&format!("{prefix}_count")) {
            histogram.count += value;
        }
    }
    for h in out.values_mut() {
        h.buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

async fn apiserver_metrics(client: &Client) -> String {
    let request = http::Request::get("/metrics")
        .body(Vec::new())
        .expect("request");
    client
        .request_text(request)
        .await
        .expect("apiserver /metrics")
}

#[tokio::main]
async fn main() {
    let env = TestEnv::start().await.expect("control plane");
    let client = env.client();
    for group in [WASM, NATIVE, FLOOR] {
        support::install_cache_crd_in(&client, group)
            .await
            .expect("crd");
    }
    let ns = env.create_namespace("admission").await.expect("namespace");
    let module =
        std::fs::read(support::guest_module("cache-operator").expect("module")).expect("read");
    support::put_module(&client, &ns, "module", "module.wasm", &module)
        .await
        .expect("module");
    support::put_guest_list(
        &client,
        &ns,
        "guests",
        &format!("guests:\n  - name: cache-wasm\n    module:\n      configMap: {{name: module, key: module.wasm}}\n    namespaces: [{ns}]\n    timeout: 1s\n    settings: {{apiGroup: {WASM}}}\n"),
    )
    .await
    .expect("guest list");
    let (_, kubeconfig) = support::admin_identity(&env, "wasmop-bench")
        .await
        .expect("identity");
    let cache_dir = env.temp_dir().join("cache-admission");
    let mut host = support::HostProcess::start(
        &env,
        &kubeconfig,
        &ns,
        &[
            "--guests-configmap",
            &format!("{ns}/guests"),
            "--cache-dir",
            cache_dir.to_str().expect("utf-8"),
            "--webhook-host",
            "127.0.0.1",
            "--webhook-bind-address",
            "127.0.0.1:0",
        ],
    )
    .expect("host");
    host.wait_for_log("serving webhooks on", Duration::from_secs(120))
        .await
        .expect("webhooks");
    let validating: Api<
        k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration,
    > = Api::all(client.clone());
    support::wait_for(Duration::from_secs(60), || async {
        Ok(validating.get_opt("wasmop-cache-wasm").await?.map(|_| ()))
    })
    .await
    .expect("the host's webhook configurations");

    let certificate = Certificate::self_issued("127.0.0.1").expect("certificate");
    let addr = serve_native(&certificate).await;
    let ca = base64::engine::general_purpose::STANDARD.encode(&certificate.ca_pem);
    register_native(&client, addr, &ca, &ns).await;
    // The API server picks up new configurations within a second.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let apis: Vec<(&'static str, Api<DynamicObject>)> = [WASM, NATIVE, FLOOR]
        .into_iter()
        .map(|g| {
            (
                g,
                support::dyn_api(&client, g, "v1alpha1", "Cache", "caches", &ns),
            )
        })
        .collect();
    let mut latencies: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let create = |group: &'static str, api: &Api<DynamicObject>, i: usize| {
        let api = api.clone();
        async move {
            let cache: DynamicObject = serde_json::from_value(json!({
                "apiVersion": format!("{group}/v1alpha1"), "kind": "Cache",
                "metadata": {"name": format!("c{i}")},
                "spec": {"image": "redis:7.2", "replicas": 1, "config": {"maxmemory": "64mb"}},
            }))
            .expect("cache");
            let started = Instant::now();
            let created = api
                .create(&PostParams::default(), &cache)
                .await
                .expect("create");
            let took = started.elapsed().as_secs_f64();
            if group != FLOOR {
                assert_eq!(
                    created.data["spec"]["config"]["maxmemory-policy"], "allkeys-lru",
                    "{group}: not defaulted"
                );
            }
            took
        }
    };
    for i in 0..WARMUP {
        for (group, api) in &apis {
            create(group, api, i).await;
        }
    }
    let before = admission_histograms(&apiserver_metrics(&client).await);
    for i in WARMUP..(WARMUP + N) {
        for (group, api) in &apis {
            let took = create(group, api, i).await;
            latencies.entry(group).or_default().push(took);
        }
    }
    let after = admission_histograms(&apiserver_metrics(&client).await);

    println!(
        "admission bench: {N} creates per kind after {WARMUP} warm-up, interleaved; the cache-operator's admit as wasm (host) and native"
    );
    println!("cpu: {}", wasmop_testenv::cpu_model());
    println!(
        "\nthe API server's apiserver_admission_webhook_admission_duration_seconds (mean exact; p50/p99 interpolated in 5 ms / 25 ms buckets):"
    );
    println!(
        "{:<34} {:>6} {:>10} {:>10} {:>10}",
        "webhook", "calls", "mean ms", "p50 ms", "p99 ms"
    );
    let mut means = BTreeMap::new();
    for name in [
        "mutate.cache-wasm.wasmop.dev",
        "validate.cache-wasm.wasmop.dev",
        "mutate.native.bench.example.com",
        "validate.native.bench.example.com",
    ] {
        let (a, b) = (after.get(name), before.get(name));
        let Some(a) = a else {
            println!("{name:<34} no samples");
            continue;
        };
        let b_count = b.map_or(0.0, |b| b.count);
        let b_sum = b.map_or(0.0, |b| b.sum);
        let delta = Histogram {
            buckets: a
                .buckets
                .iter()
                .map(|&(le, c)| {
                    let old = b
                        .and_then(|b| b.buckets.iter().find(|x| x.0 == le))
                        .map_or(0.0, |x| x.1);
                    (le, c - old)
                })
                .collect(),
            sum: a.sum - b_sum,
            count: a.count - b_count,
        };
        means.insert(name, delta.mean());
        println!(
            "{name:<34} {:>6} {:>10.3} {:>10.3} {:>10.3}",
            delta.count,
            delta.mean() * 1e3,
            delta.quantile(0.5) * 1e3,
            delta.quantile(0.99) * 1e3
        );
    }
    for verb in ["mutate", "validate"] {
        let wasm = means.get(format!("{verb}.cache-wasm.wasmop.dev").as_str());
        let native = means.get(format!("{verb}.native.bench.example.com").as_str());
        if let (Some(w), Some(n)) = (wasm, native) {
            println!("{verb}: mean wasm / native = {:.2} (target <= 1.5)", w / n);
        }
    }

    println!("\nthe client's view: a whole create (API server, both webhooks, etcd):");
    println!(
        "{:<26} {:>10} {:>10} {:>16}",
        "kind", "p50 ms", "p99 ms", "p50 over floor"
    );
    let mut sorted: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for (group, mut l) in latencies {
        l.sort_by(f64::total_cmp);
        sorted.insert(group, l);
    }
    let floor = quantile(&sorted[FLOOR], 0.5);
    for group in [WASM, NATIVE, FLOOR] {
        let l = &sorted[group];
        println!(
            "{group:<26} {:>10.3} {:>10.3} {:>16.3}",
            quantile(l, 0.5) * 1e3,
            quantile(l, 0.99) * 1e3,
            (quantile(l, 0.5) - floor) * 1e3
        );
    }
    let over = |g: &str| quantile(&sorted[g], 0.5) - floor;
    println!(
        "webhooks' p50 over the floor, wasm / native = {:.2}",
        over(WASM) / over(NATIVE).max(1e-6)
    );
    host.stop();
}
