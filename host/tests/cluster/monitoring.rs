//! The monitoring kit of `deploy/monitoring/`, checked with the real tools
//! (promtool built from the Go module proxy, the Prometheus Operator's
//! CRDs on the real API server): the alert rules pass `promtool check
//! rules` and their unit tests, a real scrape of a host that reconciled,
//! admitted, trapped, swapped and refused an outbound request is lint-clean and
//! feeds every dashboard query and every metric the alerts read, and the
//! kustomization applies (`--dry-run=server`). A real OpenTelemetry
//! Collector (built from the Go module proxy, with the file exporter)
//! receives a reconcile's trace, and the guest's outbound request carries
//! that trace's `traceparent`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail, ensure};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use wasmop_testenv::TestEnv;
use wasmop_testenv::harness::Test;

use crate::support;
use crate::support::guests::{Entry, GuestList};
use crate::support::{
    HostProcess, admin_identity, cache_crd, dyn_api, guest_module, http_attack, install_crd,
    install_yaml, kubectl, parse_prometheus, put_guest_list, put_module, wait_for,
    webhook_host_with, workspace,
};

const LONG: Duration = Duration::from_secs(120);
const LIST: &str = support::WEBHOOK_LIST;

/// The alerts the kit promises (interface contract).
const ALERTS: &[&str] = &[
    "WasmopGuestReconcileErrors",
    "WasmopGuestNotLoaded",
    "WasmopModuleFetchFailing",
    "WasmopRolloutAborted",
    "WasmopWorkQueueStuck",
    "WasmopWebhookErrors",
    "WasmopNoLeader",
    "WasmopShardWithoutHolder",
];

/// The labels Prometheus adds to every series it scrapes through the
/// kit's ServiceMonitor: what the dashboard's queries select on.
const TARGET_LABELS: &[(&str, &str)] = &[
    ("job", "wasmop-metrics"),
    ("namespace", "wasmop-system"),
    ("pod", "wasmop-0"),
];

fn kit() -> PathBuf {
    workspace().join("deploy/monitoring")
}

fn promtool() -> anyhow::Result<PathBuf> {
    wasmop_testenv::ensure_promtool()
}

/// Runs promtool with `args` in `dir` (with `stdin`); fails with its output
/// unless it exits 0. Returns its stdout and stderr.
fn run_promtool(dir: &Path, args: &[&str], stdin: Option<&str>) -> anyhow::Result<String> {
    use std::io::Write as _;
    let mut child = Command::new(promtool()?)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("running promtool")?;
    let mut input = child.stdin.take().context("stdin")?;
    if let Some(text) = stdin {
        input.write_all(text.as_bytes())?;
    }
    drop(input);
    let out = child.wait_with_output()?;
    crate::support::tool_output("promtool", args, &out)
}

/// The PrometheusRule of the kit.
fn prometheus_rule() -> anyhow::Result<Value> {
    let text = std::fs::read_to_string(kit().join("alerts.yaml"))?;
    let rule: Value = serde_saphyr::from_str(&text)?;
    ensure!(
        rule["apiVersion"] == "monitoring.coreos.com/v1" && rule["kind"] == "PrometheusRule",
        "alerts.yaml is not a PrometheusRule"
    );
    Ok(rule)
}

/// Every alerting rule of the kit.
fn alert_rules() -> anyhow::Result<Vec<Value>> {
    Ok(prometheus_rule()?["spec"]["groups"]
        .as_array()
        .context("no groups")?
        .iter()
        .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
        .filter(|r| r.get("alert").is_some())
        .collect())
}

/// A temporary directory holding the PrometheusRule's spec as a plain rule
/// file (JSON is YAML), `alerts.rules.yaml`, which promtool reads.
fn rule_dir() -> anyhow::Result<tempfile::TempDir> {
    let dir = tempfile::tempdir()?;
    let spec = &prometheus_rule()?["spec"];
    std::fs::write(
        dir.path().join("alerts.rules.yaml"),
        serde_json::to_string_pretty(spec)?,
    )?;
    Ok(dir)
}

/// The headings of `docs/runbooks.md` as GitHub anchors.
fn runbook_anchors() -> anyhow::Result<BTreeSet<String>> {
    let text = std::fs::read_to_string(workspace().join("docs/runbooks.md"))?;
    Ok(text
        .lines()
        .filter_map(|l| l.strip_prefix("## "))
        .map(|h| {
            h.trim()
                .to_lowercase()
                .chars()
                .filter(|c| c.is_alphanumeric() || *c == '-' || *c == ' ')
                .map(|c| if c == ' ' { '-' } else { c })
                .collect()
        })
        .collect())
}

async fn the_alert_rules_pass_promtool_and_fire_only_on_their_faults(
    _env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let rules = alert_rules()?;
    let names: BTreeSet<&str> = rules.iter().filter_map(|r| r["alert"].as_str()).collect();
    for wanted in ALERTS {
        ensure!(
            names.contains(wanted),
            "alert {wanted} is missing: {names:?}"
        );
    }
    let anchors = runbook_anchors()?;
    for rule in &rules {
        let name = rule["alert"].as_str().unwrap_or_default();
        ensure!(
            rule["labels"]["severity"].is_string(),
            "{name} has no severity"
        );
        for key in ["summary", "description", "runbook_url"] {
            ensure!(
                rule["annotations"][key]
                    .as_str()
                    .is_some_and(|s| !s.is_empty()),
                "{name} has no {key}"
            );
        }
        let url = rule["annotations"]["runbook_url"]
            .as_str()
            .unwrap_or_default();
        let anchor = url
            .split_once("docs/runbooks.md#")
            .map(|(_, a)| a)
            .with_context(|| format!("{name}'s runbook_url {url} is not docs/runbooks.md#…"))?;
        ensure!(
            anchor == name.to_lowercase() && anchors.contains(anchor),
            "{name}'s runbook_url names #{anchor}, which docs/runbooks.md has no section for (sections: {anchors:?})"
        );
    }

    let dir = rule_dir()?;
    let checked = run_promtool(dir.path(), &["check", "rules", "alerts.rules.yaml"], None)?;
    ensure!(
        checked.contains(&format!("SUCCESS: {} rules found", rules.len())),
        "{checked}"
    );
    // Every alert has a case in which it fires.
    let tests_path = workspace().join("tests/monitoring/alerts.test.yaml");
    let tests: Value = serde_saphyr::from_str(&std::fs::read_to_string(&tests_path)?)?;
    let fired: BTreeSet<&str> = tests["tests"]
        .as_array()
        .context("no tests")?
        .iter()
        .flat_map(|t| t["alert_rule_test"].as_array().into_iter().flatten())
        .filter(|t| t["exp_alerts"].as_array().is_some_and(|a| !a.is_empty()))
        .filter_map(|t| t["alertname"].as_str())
        .collect();
    for name in &names {
        ensure!(
            fired.contains(name),
            "no case of {} makes {name} fire",
            tests_path.display()
        );
    }
    std::fs::copy(&tests_path, dir.path().join("alerts.test.yaml"))?;
    let tested = run_promtool(dir.path(), &["test", "rules", "alerts.test.yaml"], None)?;
    ensure!(tested.contains("SUCCESS"), "{tested}");
    Ok(())
}

/// `text` (the Prometheus text format, parsed by `parse_prometheus`) as
/// promtool input series over 20 minutes, with the target's labels:
/// cumulative samples (counters, histograms) grow by one a minute, gauges
/// keep their value.
fn input_series(parsed: &Value) -> anyhow::Result<Vec<Value>> {
    let mut series = Vec::new();
    for family in parsed.as_object().context("families")?.values() {
        let cumulative = matches!(
            family["type"].as_str(),
            Some("counter" | "histogram" | "summary")
        );
        for sample in family["samples"].as_array().into_iter().flatten() {
            let mut labels: Vec<String> = TARGET_LABELS
                .iter()
                .map(|(k, v)| format!("{k}={}", serde_json::to_string(v).unwrap_or_default()))
                .collect();
            for (k, v) in sample["labels"].as_object().into_iter().flatten() {
                labels.push(format!("{k}={}", serde_json::to_string(v)?));
            }
            let name = sample["name"].as_str().context("a sample without a name")?;
            let value = sample["value"].as_f64().unwrap_or_default();
            series.push(json!({
                "series": format!("{name}{{{}}}", labels.join(",")),
                "values": if cumulative { "0+1x20".to_owned() } else { format!("{value}x20") },
            }));
        }
    }
    Ok(series)
}

/// Every query of the dashboard, with Grafana's variables as a user with
/// every guest selected would have them.
fn dashboard_queries() -> anyhow::Result<Vec<(String, String)>> {
    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(kit().join("dashboard.json"))?)?;
    let variables: Vec<&str> = dashboard["templating"]["list"]
        .as_array()
        .context("no variables")?
        .iter()
        .filter_map(|v| v["name"].as_str())
        .collect();
    ensure!(
        variables.contains(&"guest"),
        "the dashboard has no guest variable: {variables:?}"
    );
    let mut queries = Vec::new();
    for panel in dashboard["panels"].as_array().context("no panels")? {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().context("a target without expr")?;
            let expr = expr
                .replace("$__rate_interval", "5m")
                .replace("$guest", ".*");
            ensure!(!expr.contains('$'), "an unknown variable in {expr}");
            queries.push((panel["title"].as_str().unwrap_or_default().to_owned(), expr));
        }
    }
    ensure!(queries.len() >= 10, "only {} queries", queries.len());
    Ok(queries)
}

/// The metric names an expression reads (the host's families).
fn metric_names(expr: &str) -> BTreeSet<String> {
    const PREFIXES: &[&str] = &[
        "controller_runtime_",
        "workqueue_",
        "wasmop_",
        "leader_election_",
        "rest_client_",
        "process_",
    ];
    expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .filter(|t| PREFIXES.iter().any(|p| t.starts_with(p)))
        .map(str::to_owned)
        .collect()
}

async fn a_real_scrape_is_lint_clean_and_feeds_every_dashboard_query_and_alert(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    const GROUP: &str = "monitoring.example.com";
    let guest = "cache-monitoring";
    let client = env.client();
    install_crd(&client, serde_json::from_value(cache_crd(GROUP)?)?).await?;
    install_yaml(&client, &workspace().join("guests/hostile/crd.yaml")).await?;
    let ns = env.create_namespace("monitoring").await?;
    put_module(
        &client,
        &ns,
        "module",
        "module.wasm",
        &std::fs::read(guest_module("cache-operator")?)?,
    )
    .await?;
    support::put_hostile_module(&client, &ns).await?;
    let list = GuestList::of([
        Entry::config_map(guest, "module")
            .namespaces([&ns])
            .with("settings", json!({"apiGroup": GROUP, "version": "v1beta1"})),
        Entry::hostile(&ns),
    ]);
    put_guest_list(&client, &ns, LIST, &list.yaml()).await?;
    let cert = format!("{ns}/wasmop-webhook-tls");
    let mut host = webhook_host_with(
        &env,
        &ns,
        &["--leader-elect", "--webhook-cert-secret", &cert],
    )
    .await?;
    let metrics = host.endpoint("metrics").await?;
    host.wait_for_log("became the leader", LONG).await?;
    let webhooks: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    wait_for(LONG, || async {
        Ok(webhooks
            .get_opt(&format!("wasmop-{guest}"))
            .await?
            .map(drop))
    })
    .await
    .context("the host never wrote its webhook configuration")?;

    // A Cache admitted by the guest's webhooks and reconciled.
    let caches = dyn_api(&client, GROUP, "v1beta1", "Cache", "caches", &ns);
    let cache = serde_json::from_value(json!({
        "apiVersion": format!("{GROUP}/v1beta1"), "kind": "Cache",
        "metadata": {"name": "watched"}, "spec": {"image": "redis:7.2", "replicas": 1},
    }))?;
    // The API server may try the webhook before the host serves it.
    wait_for(LONG, || async {
        Ok(caches
            .create(&PostParams::default(), &cache)
            .await
            .ok()
            .map(drop))
    })
    .await
    .context("the Cache was never admitted")?;
    wait_for(LONG, || async {
        let c = caches.get("watched").await?;
        Ok((c.data.pointer("/status/phase") == Some(&json!("Ready"))).then_some(()))
    })
    .await
    .context("the Cache never became Ready")?;
    // An outbound request the host refuses.
    http_attack(&client, &ns, "caller", "http-get", "http://127.0.0.1:9/").await?;
    let hostiles = support::hostiles(&client, &ns);
    // A guest that traps.
    let trap = serde_json::from_value(json!({
        "apiVersion": "test.wasmop.dev/v1alpha1", "kind": "Hostile",
        "metadata": {"name": "boom"}, "spec": {"attack": "panic"},
    }))?;
    hostiles.create(&PostParams::default(), &trap).await?;
    support::wait_for_event(&client, &ns, "boom", "GuestTrap", LONG).await?;
    // A swap.
    put_module(
        &client,
        &ns,
        "module",
        "module.wasm",
        &std::fs::read(guest_module("cache-operator-v2")?)?,
    )
    .await?;
    host.wait_for_log("swapped guest module", LONG).await?;

    let text = wait_for(LONG, || async {
        let (code, text) = support::http_get(metrics, "/metrics").await?;
        ensure!(code == 200, "/metrics answered {code}");
        let refused = text.lines().any(|l| {
            l.starts_with("wasmop_guest_http_requests_total{") && l.contains("code=\"refused\"")
        });
        Ok(refused.then_some(text))
    })
    .await
    .context("the refused request was never counted")?;
    let dir = tempfile::tempdir()?;

    // promtool's linter on the real scrape.
    let lint = run_promtool(dir.path(), &["check", "metrics"], Some(&text))?;
    ensure!(lint.trim().is_empty(), "promtool check metrics:\n{lint}");

    // Every metric an alert reads is in the scrape.
    let parsed = parse_prometheus(&text)?;
    let scraped: BTreeSet<String> = parsed
        .as_object()
        .context("families")?
        .values()
        .flat_map(|f| f["samples"].as_array().cloned().unwrap_or_default())
        .filter_map(|s| s["name"].as_str().map(str::to_owned))
        .collect();
    for rule in alert_rules()? {
        let expr = rule["expr"].as_str().unwrap_or_default();
        for name in metric_names(expr) {
            ensure!(
                scraped.contains(&name),
                "alert {} reads {name}, which the host does not export",
                rule["alert"]
            );
        }
    }

    // Every dashboard query, evaluated by Prometheus' engine over the
    // scrape, returns series.
    let queries = dashboard_queries()?;
    let cases: Vec<Value> = queries
        .iter()
        .map(|(_, expr)| {
            json!({
                "expr": format!("count({expr}) > bool 0"),
                "eval_time": "10m",
                "exp_samples": [{"labels": "{}", "value": 1}],
            })
        })
        .collect();
    let test = json!({
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": input_series(&parsed)?,
            "promql_expr_test": cases,
        }],
    });
    std::fs::write(
        dir.path().join("dashboard.test.yaml"),
        serde_json::to_string_pretty(&test)?,
    )?;
    if let Err(failed) = run_promtool(dir.path(), &["test", "rules", "dashboard.test.yaml"], None) {
        let report = failed.to_string();
        let empty: Vec<&String> = queries
            .iter()
            .filter(|(_, expr)| report.contains(&expr.replace('"', "\\\"")))
            .map(|(title, _)| title)
            .collect();
        bail!("dashboard panels with no series over a real scrape: {empty:?}\n{report}");
    }
    host.terminate(Duration::from_secs(30))?;
    Ok(())
}

async fn the_kit_applies_where_the_prometheus_operators_crds_are(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let client = env.client();
    for crd in wasmop_testenv::prometheus_operator_crds()? {
        install_yaml(&client, &crd).await?;
    }
    // The kit's namespace comes from `kubectl apply -k deploy/`.
    let kubectl = |args: &[&str]| -> anyhow::Result<String> {
        let (ok, stdout, stderr) = kubectl(&env, args, None)?;
        ensure!(ok, "kubectl {} failed:\n{stderr}", args.join(" "));
        Ok(stdout)
    };
    let path = |p: &str| workspace().join(p).display().to_string();
    // Server-side: production's test of deploy/ applies it too, maybe at
    // the same moment, and a client-side apply that finds no namespace and
    // then creates it would fail on the other's.
    kubectl(&[
        "apply",
        "--server-side",
        "-f",
        &path("deploy/host/namespace.yaml"),
    ])?;
    let kit = path("deploy/monitoring/");
    let applied = kubectl(&["apply", "--dry-run=server", "-k", &kit])?;
    for object in [
        "servicemonitor.monitoring.coreos.com/wasmop",
        "prometheusrule.monitoring.coreos.com/wasmop",
        "configmap/wasmop-dashboard",
    ] {
        ensure!(
            applied.contains(&format!("{object} created (server dry run)")),
            "{object} was not applied:\n{applied}"
        );
    }
    // The dashboard ConfigMap is what Grafana's sidecar looks for.
    let rendered = kubectl(&["kustomize", &kit])?;
    let docs: Vec<Value> = serde_saphyr::from_multiple(&rendered)?;
    let dashboard = docs
        .iter()
        .find(|d| d["kind"] == "ConfigMap")
        .context("no ConfigMap")?;
    ensure!(dashboard["metadata"]["labels"]["grafana_dashboard"] == "1");
    let json: Value = serde_json::from_str(
        dashboard["data"]["wasmop.json"]
            .as_str()
            .context("no wasmop.json")?,
    )?;
    ensure!(json["uid"] == "wasmop");
    Ok(())
}

/// The test collector (`tests/otelcol`): OTLP/HTTP on a free local port,
/// every span written to `traces.jsonl` as OTLP JSON. Killed on drop.
struct Collector {
    child: std::process::Child,
    endpoint: String,
    file: PathBuf,
    dir: tempfile::TempDir,
}

impl Collector {
    async fn start() -> anyhow::Result<Self> {
        let program = tokio::task::spawn_blocking(wasmop_testenv::ensure_otelcol).await??;
        let dir = tempfile::tempdir()?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let file = dir.path().join("traces.jsonl");
        let config = dir.path().join("config.yaml");
        std::fs::write(
            &config,
            format!(
                "receivers:\n  otlp:\n    protocols:\n      http:\n        endpoint: 127.0.0.1:{port}\n\
                 exporters:\n  file:\n    path: {}\n    flush_interval: 100ms\n\
                 service:\n  telemetry:\n    metrics:\n      level: none\n  \
                 pipelines:\n    traces:\n      receivers: [otlp]\n      exporters: [file]\n",
                file.display()
            ),
        )?;
        let log = std::fs::File::create(dir.path().join("otelcol.log"))?;
        let child = Command::new(program)
            .arg("--config")
            .arg(format!("file:{}", config.display()))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("starting the collector")?;
        let mut collector = Self {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
            file,
            dir,
        };
        let deadline = tokio::time::Instant::now() + LONG;
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            if let Some(status) = collector.child.try_wait()? {
                bail!("the collector exited ({status}): {}", collector.log());
            }
            ensure!(
                tokio::time::Instant::now() < deadline,
                "the collector never listened: {}",
                collector.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(collector)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("otelcol.log")).unwrap_or_default()
    }

    /// Every span received so far, flattened: (trace, span, parent, name,
    /// attributes as strings).
    fn spans(&self) -> anyhow::Result<Vec<Span>> {
        let text = std::fs::read_to_string(&self.file).unwrap_or_default();
        let mut spans = Vec::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let batch: Value = serde_json::from_str(line)?;
            for resource in batch["resourceSpans"].as_array().into_iter().flatten() {
                let service = attributes(&resource["resource"]["attributes"])
                    .remove("service.name")
                    .unwrap_or_default();
                for scope in resource["scopeSpans"].as_array().into_iter().flatten() {
                    for span in scope["spans"].as_array().into_iter().flatten() {
                        let text = |k: &str| span[k].as_str().unwrap_or_default().to_owned();
                        spans.push(Span {
                            trace: text("traceId"),
                            id: text("spanId"),
                            parent: text("parentSpanId"),
                            name: text("name"),
                            service: service.clone(),
                            attributes: attributes(&span["attributes"]),
                        });
                    }
                }
            }
        }
        Ok(spans)
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One span as the collector wrote it.
#[derive(Debug, Clone)]
struct Span {
    trace: String,
    id: String,
    parent: String,
    name: String,
    service: String,
    attributes: std::collections::BTreeMap<String, String>,
}

/// OTLP JSON attributes as key → value text.
fn attributes(list: &Value) -> std::collections::BTreeMap<String, String> {
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| {
            let value = a["value"].as_object()?.values().next()?;
            let text = value
                .as_str()
                .map_or_else(|| value.to_string(), str::to_owned);
            Some((a["key"].as_str()?.to_owned(), text))
        })
        .collect()
}

async fn a_reconcile_is_one_trace_down_to_the_guests_outbound_request(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let collector = Collector::start().await?;
    // The guest's destination records the trace context each request has.
    let seen: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    let app = axum::Router::new()
        .fallback(
            |axum::extract::State(seen): axum::extract::State<
                Arc<std::sync::Mutex<Vec<String>>>,
            >,
             uri: axum::http::Uri,
             headers: axum::http::HeaderMap| async move {
                let traceparent = headers
                    .get("traceparent")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("(none)");
                seen.lock()
                    .unwrap()
                    .push(format!("{} {traceparent}", uri.path()));
                "recorded"
            },
        )
        .with_state(seen.clone());
    let server = tokio::spawn(async move { axum::serve(listener, app).await });

    let client = env.client();
    install_yaml(&client, &workspace().join("guests/hostile/crd.yaml")).await?;
    let ns = env.create_namespace("traces").await?;
    let (_, kubeconfig) = admin_identity(&env, &format!("wasmop-{ns}")).await?;
    let mut args = traced_hostile(&ns, &collector)?;
    args.extend([
        "--allow-outbound".to_owned(),
        format!("hostile=http://127.0.0.1:{port}"),
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut host = HostProcess::start(&env, &kubeconfig, &ns, &args)?;
    let answered = http_attack(
        &client,
        &ns,
        "traced",
        "http-get",
        &format!("http://127.0.0.1:{port}/hello"),
    )
    .await
    .with_context(|| {
        format!(
            "the Hostile was never reconciled; host log:\n{}",
            host.log()
        )
    })?;
    let hostiles = support::hostiles(&client, &ns);
    ensure!(
        answered == "ok: 200 recorded",
        "the guest's request: {answered}"
    );

    // The trace of a reconcile whose outbound request reached the server.
    let object = format!("{ns}/traced");
    let (trace, spans) = wait_for(LONG, || async {
        let spans = collector.spans()?;
        let received: Vec<String> = seen.lock().unwrap().clone();
        for line in &received {
            let Some(traceparent) = line.strip_prefix("/hello ") else {
                continue;
            };
            let parts: Vec<&str> = traceparent.split('-').collect();
            let [_, trace, _, _] = parts[..] else {
                bail!("the guest's request carried no trace context: {received:?}");
            };
            let in_trace: Vec<Span> = spans.iter().filter(|s| s.trace == trace).cloned().collect();
            if in_trace.iter().any(|s| s.name == "reconcile") {
                return Ok(Some((traceparent.to_owned(), in_trace)));
            }
        }
        Ok(None)
    })
    .await
    .with_context(|| {
        format!(
            "no trace of the reconcile reached the collector: {}",
            collector.log()
        )
    })?;
    let one = |name: &str| -> anyhow::Result<&Span> {
        spans
            .iter()
            .find(|s| s.name == name)
            .with_context(|| format!("no {name} span in the trace: {spans:#?}"))
    };
    let reconcile = one("reconcile")?;
    ensure!(
        reconcile.parent.is_empty(),
        "the reconcile span is not the root: {reconcile:?}"
    );
    ensure!(
        reconcile.service == "wasmop",
        "service.name is {:?}",
        reconcile.service
    );
    ensure!(
        reconcile.attributes.get("guest").map(String::as_str) == Some("hostile")
            && reconcile.attributes.get("object") == Some(&object),
        "the reconcile span names another parent or guest: {reconcile:?}"
    );
    ensure!(
        reconcile
            .attributes
            .get("queue_wait_ms")
            .is_some_and(|ms| ms.parse::<u64>().is_ok()),
        "the reconcile span does not say how long it waited in the queue: {reconcile:?}"
    );
    let call = one("guest reconcile")?;
    ensure!(
        call.parent == reconcile.id,
        "the guest call is not under the reconcile: {call:?}"
    );
    ensure!(call.attributes.get("export").map(String::as_str) == Some("reconcile"));
    let outbound = spans
        .iter()
        .find(|s| {
            s.parent == call.id
                && s.attributes
                    .get("url.full")
                    .is_some_and(|u| u.ends_with("/hello"))
        })
        .with_context(|| format!("no outbound request under the guest call: {spans:#?}"))?;
    ensure!(
        trace == format!("00-{}-{}-01", outbound.trace, outbound.id),
        "the request carried {trace}, not the outbound span's context {outbound:?}"
    );
    let api: Vec<&Span> = spans
        .iter()
        .filter(|s| s.parent == reconcile.id && s.attributes.contains_key("http.request.method"))
        .collect();
    ensure!(
        api.iter().any(|s| s.name.starts_with("PATCH ")
            && s.name.ends_with("/hostiles/traced/status")
            && s.attributes
                .get("http.response.status_code")
                .map(String::as_str)
                == Some("200")),
        "the status write is not a child of the reconcile: {api:#?}"
    );

    // A guest that sends a trace context of its own: the host's replaces it.
    let forged = serde_json::from_value(json!({
        "apiVersion": "test.wasmop.dev/v1alpha1", "kind": "Hostile",
        "metadata": {"name": "forged"},
        "spec": {"attack": "http-forged-trace", "target": format!("http://127.0.0.1:{port}/forged")},
    }))?;
    hostiles.create(&PostParams::default(), &forged).await?;
    let sent = wait_for(LONG, || async {
        let received: Vec<String> = seen.lock().unwrap().clone();
        Ok(received
            .iter()
            .find_map(|l| l.strip_prefix("/forged "))
            .map(str::to_owned))
    })
    .await
    .context("the forged request never arrived")?;
    ensure!(
        !sent.contains("0af7651916cd43dd8448eb211c80319c"),
        "the guest's own trace context went out: {sent}"
    );
    let trace = sent.split('-').nth(1).unwrap_or_default().to_owned();
    wait_for(LONG, || async {
        Ok(collector
            .spans()?
            .iter()
            .any(|s| s.trace == trace && s.name == "reconcile")
            .then_some(()))
    })
    .await
    .with_context(|| format!("{sent} is not the trace of a reconcile"))?;

    host.terminate(Duration::from_secs(30))?;
    server.abort();
    Ok(())
}

/// `wasmop run` arguments for a host that serves the hostile guest in `ns`
/// and sends its traces to `collector`.
fn traced_hostile(ns: &str, collector: &Collector) -> anyhow::Result<Vec<String>> {
    Ok([
        "--guest",
        &support::guest_arg("hostile")?,
        "--namespace",
        ns,
        "--otlp-endpoint",
        &collector.endpoint,
        // The hostile guest converts: its CRD names the host serving it.
        "--webhook-host",
        "127.0.0.1",
        "--webhook-bind-address",
        "127.0.0.1:0",
    ]
    .map(str::to_owned)
    .to_vec())
}

/// What a host logs once the hostile CRD's conversion names its webhook.
const CONVERSION_SET: &str = "set the CRD's conversion to the guest's webhook";

/// Sampling follows `OTEL_TRACES_SAMPLER`: a host told `always_off`
/// exports no span of its reconciles, not even when it flushes on shutdown,
/// while a host with the default sampler, on the same collector right
/// after, exports its reconciles (so the pipeline the first host left
/// unused works).
async fn a_host_told_to_sample_nothing_exports_no_span(env: Arc<TestEnv>) -> anyhow::Result<()> {
    let collector = Collector::start().await?;
    let client = env.client();
    install_yaml(&client, &workspace().join("guests/hostile/crd.yaml")).await?;
    let ns = env.create_namespace("unsampled").await?;
    let (_, kubeconfig) = admin_identity(&env, &format!("wasmop-{ns}")).await?;
    let args = traced_hostile(&ns, &collector)?;
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let hostiles = support::hostiles(&client, &ns);
    let configmaps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), &ns);
    let reconciled = |name: &'static str| {
        let configmaps = configmaps.clone();
        async move {
            wait_for(LONG, || async {
                Ok(configmaps.get_opt(&format!("{name}-ok")).await?.map(|_| ()))
            })
            .await
            .with_context(|| format!("{name} was not reconciled"))
        }
    };
    let hostile = |name: &str| -> anyhow::Result<kube::api::DynamicObject> {
        Ok(serde_json::from_value(json!({
            "apiVersion": "test.wasmop.dev/v1alpha1", "kind": "Hostile",
            "metadata": {"name": name}, "spec": {"attack": "none"},
        }))?)
    };

    let mut host = HostProcess::start_with_env(
        &env,
        &kubeconfig,
        &ns,
        &args,
        &[
            ("OTEL_TRACES_SAMPLER", "always_off"),
            ("OTEL_SERVICE_NAME", "wasmop-unsampled"),
        ],
    )?;
    host.wait_for_log(CONVERSION_SET, LONG).await?;
    hostiles
        .create(&PostParams::default(), &hostile("unsampled")?)
        .await?;
    reconciled("unsampled").await?;
    // The host flushes what it sampled before it exits.
    host.terminate(Duration::from_secs(30))?;

    let mut host = HostProcess::start(&env, &kubeconfig, &ns, &args)?;
    host.wait_for_log(CONVERSION_SET, LONG).await?;
    hostiles
        .create(&PostParams::default(), &hostile("sampled")?)
        .await?;
    reconciled("sampled").await?;
    let object = format!("{ns}/sampled");
    wait_for(LONG, || async {
        Ok(collector
            .spans()?
            .iter()
            .any(|s| s.name == "reconcile" && s.attributes.get("object") == Some(&object))
            .then_some(()))
    })
    .await
    .with_context(|| {
        format!(
            "the sampled host's reconcile never arrived: {}",
            collector.log()
        )
    })?;
    host.terminate(Duration::from_secs(30))?;
    let unsampled: Vec<Span> = collector
        .spans()?
        .into_iter()
        .filter(|s| s.service == "wasmop-unsampled")
        .collect();
    ensure!(
        unsampled.is_empty(),
        "a host told OTEL_TRACES_SAMPLER=always_off exported spans: {unsampled:#?}"
    );
    Ok(())
}

/// The tests of this module.
///
/// Three of them serve the hostile guest's webhooks: their host points the
/// guest's cluster-wide CRD at itself (its conversion) and writes the
/// webhook configurations `wasmop-hostile`, which every other test's host of
/// the hostile guest would find so; they run alone.
pub fn tests() -> Vec<Test> {
    wasmop_testenv::tests![
        the_alert_rules_pass_promtool_and_fire_only_on_their_faults,
        #[alone] a_real_scrape_is_lint_clean_and_feeds_every_dashboard_query_and_alert => Duration::from_secs(300),
        the_kit_applies_where_the_prometheus_operators_crds_are => Duration::from_secs(300),
        #[alone] a_reconcile_is_one_trace_down_to_the_guests_outbound_request => Duration::from_secs(300),
        #[alone] a_host_told_to_sample_nothing_exports_no_span => Duration::from_secs(300),
    ]
}
