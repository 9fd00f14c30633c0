//! End to end on the real control plane: guests' outbound HTTP (issue:
//! capabilities, outbound HTTP by allowlist, finalizers that clean up
//! outside the cluster). A real HTTP server in this test binary stands for
//! the external registry and records every request that reaches it. The
//! registry cases run once per language the cache-operator is written in
//! (`rust::<case>`, `ts::`, `python::`: its registry build, which imports
//! `wasi:http`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, bail, ensure};
use axum::extract::State;
use axum::http::{Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::apps::v1::Deployment;
use kube::Client;
use kube::api::{Api, DeleteParams};
use serde_json::json;
use wasmop_testenv::TestEnv;
use wasmop_testenv::Window;
use wasmop_testenv::harness::Test;

use crate::support;
use crate::support::hostile::HostileHost;
use crate::support::lang::{Lang, compiled, per_language};
use crate::support::{
    HostProcess, at, caches, guest_module, http_attack, install_cache_crd, wait_for,
    wait_for_event, workspace,
};

const LONG: Duration = Duration::from_secs(120);

/// The external registry: answers every request with 200 (`/hang` never
/// answers; `/redirect?to=URL` answers 302 to URL; `/big` sends 2 MiB) and
/// records each as `METHOD path`. It can be stopped and started again on its port.
struct Recorder {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<String>>>,
    server: Option<tokio::task::JoinHandle<()>>,
}

/// Reads the whole request before it answers, as a registry does: a server
/// that answers first and closes can break the client's body mid-write.
async fn record(
    State(seen): State<Arc<Mutex<Vec<String>>>>,
    method: Method,
    uri: Uri,
    _body: axum::body::Bytes,
) -> Response {
    seen.lock()
        .unwrap()
        .push(format!("{method} {}", uri.path()));
    match uri.path() {
        "/hang" => std::future::pending().await,
        // Past the host's 1 MiB cap on a response body.
        "/big" => (StatusCode::OK, "x".repeat(2 << 20)).into_response(),
        "/redirect" => match uri.query().and_then(|q| q.strip_prefix("to=")) {
            Some(to) => (StatusCode::FOUND, [(header::LOCATION, to.to_owned())]).into_response(),
            None => StatusCode::BAD_REQUEST.into_response(),
        },
        _ => (StatusCode::OK, "recorded").into_response(),
    }
}

impl Recorder {
    async fn start() -> anyhow::Result<Self> {
        let mut recorder = Self {
            addr: "127.0.0.1:0".parse()?,
            seen: Arc::default(),
            server: None,
        };
        recorder.start_again().await?;
        Ok(recorder)
    }

    /// Serves on the recorder's port (a free one the first time).
    async fn start_again(&mut self) -> anyhow::Result<()> {
        let listener = tokio::net::TcpListener::bind(self.addr)
            .await
            .with_context(|| format!("binding {}", self.addr))?;
        self.addr = listener.local_addr()?;
        let app = axum::Router::new()
            .fallback(record)
            .with_state(self.seen.clone());
        self.server = Some(tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        }));
        Ok(())
    }

    /// Stops serving: connections to the port are refused.
    async fn stop(&mut self) {
        if let Some(server) = self.server.take() {
            server.abort();
            let _ = server.await;
        }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn requests(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }

    fn count(&self, request: &str) -> usize {
        self.requests().iter().filter(|r| *r == request).count()
    }
}

/// A file of its own under the env's temp dir holding `text`: the cases of
/// each language write theirs at once, each with its own registry's URL.
fn temp_file(env: &TestEnv, name: &str, text: &str) -> anyhow::Result<PathBuf> {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = env
        .temp_dir()
        .join(format!("{name}-{}-{n}.yaml", std::process::id()));
    std::fs::write(&path, text)?;
    Ok(path)
}

/// The registry build of `lang`'s cache-operator.
fn registry_module(lang: Lang) -> &'static str {
    match lang {
        Lang::Rust => "cache-operator-registry",
        Lang::TypeScript => "cache-operator-ts-registry",
        Lang::Python => "cache-operator-py-registry",
        Lang::Go => "cache-operator-go-registry",
    }
}

/// A host running `lang`'s cache-operator registry build with `registryUrl`
/// set to the recorder and that origin granted, under the least-privilege
/// roles.
async fn registry_host(
    env: &TestEnv,
    prefix: &str,
    recorder: &Recorder,
    lang: Lang,
) -> anyhow::Result<(Client, String, HostProcess)> {
    let client = env.client();
    install_cache_crd(&client).await?;
    let ns = env
        .create_namespace(&format!("{prefix}-{}", lang.suffix()))
        .await?;
    // One module cache for the binary: a TypeScript or Python component is
    // compiled once, before the first host, not by every host (both cases
    // of a language start at once).
    let cache_dir = compiled(env, registry_module(lang)).await?;
    let (_, kubeconfig) = support::least_privilege(env, &ns, &ns, &["cache-operator"]).await?;
    let settings = temp_file(env, prefix, &format!("registryUrl: {}\n", recorder.url()))?;
    let host = HostProcess::start(
        env,
        &kubeconfig,
        &ns,
        &[
            "--guest",
            &format!(
                "cache-operator={}",
                guest_module(registry_module(lang))?.display()
            ),
            "--cache-dir",
            cache_dir.to_str().context("utf-8")?,
            "--settings",
            &format!("cache-operator={}", settings.display()),
            "--allow-outbound",
            &format!("cache-operator={}", recorder.url()),
            // A registration that timed out after it arrived is sent again
            // (PUT is idempotent); on a loaded machine a 1 s reconcile can
            // run out during the request, which this test counts.
            "--timeout",
            "10s",
            "--namespace",
            &ns,
        ],
    )?;
    Ok((client, ns, host))
}

/// The `Registered` condition of a Cache: (status, reason, message).
fn registered(cache: &kube::api::DynamicObject) -> Option<(String, String, String)> {
    at(cache, "/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Registered")
        .map(|c| {
            let text = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
            (text("status"), text("reason"), text("message"))
        })
}

async fn wait_registered(client: &Client, ns: &str, name: &str) -> anyhow::Result<()> {
    let api = caches(client, ns);
    wait_for(LONG, || async {
        let cache = api.get(name).await?;
        match registered(&cache) {
            Some((status, _, _)) if status == "True" => Ok(Some(())),
            other => bail!("Cache {name}: Registered is {other:?}"),
        }
    })
    .await
}

/// Waits until `name` reports `CleanupBlocked`; returns the condition's
/// message.
async fn wait_cleanup_blocked(
    api: &Api<kube::api::DynamicObject>,
    name: &str,
) -> anyhow::Result<String> {
    wait_for(LONG, || async {
        let cache = api.get(name).await?;
        match registered(&cache) {
            Some((_, r, m)) if r == "CleanupBlocked" => Ok(Some(m)),
            other => bail!("Registered is {other:?}"),
        }
    })
    .await
}

async fn wait_gone(client: &Client, ns: &str, name: &str) -> anyhow::Result<()> {
    let api = caches(client, ns);
    wait_for(LONG, || async {
        Ok(api.get_opt(name).await?.is_none().then_some(()))
    })
    .await
    .with_context(|| format!("Cache {name} was never deleted"))
}

async fn twenty_caches_register_once_when_ready_and_deregister_once_on_delete(
    env: Arc<TestEnv>,
    lang: Lang,
) -> anyhow::Result<()> {
    let recorder = Recorder::start().await?;
    let (client, ns, mut host) = registry_host(&env, "registry", &recorder, lang).await?;
    let names: Vec<String> = (0..20).map(|i| format!("reg-{i}")).collect();
    for name in &names {
        support::create_cache(&client, &ns, name, json!({"image": "redis:7.2"})).await?;
    }
    for name in &names {
        wait_registered(&client, &ns, name)
            .await
            .with_context(|| host.log())?;
    }
    // Resyncs and status changes after registration send nothing more.
    let mut window = Window::new(Duration::from_secs(3));
    while window.next().await {
        for name in &names {
            let put = format!("PUT /caches/{ns}/{name}");
            if recorder.count(&put) != 1 {
                let cache = caches(&client, &ns).get(name).await?;
                eprintln!("status: {}", serde_json::to_string(&cache.data["status"])?);
                eprintln!(
                    "events: {:?}",
                    support::events_about(&client, &ns, name).await?
                );
            }
            ensure!(
                recorder.count(&put) == 1,
                "{put} reached the registry {} times; the host's lines about it:\n{}",
                recorder.count(&put),
                host.log()
                    .lines()
                    .filter(|l| l.contains(&format!("{ns}/{name} "))
                        || l.contains(&format!("cache {name}:"))
                        || l.contains("outbound"))
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
    }
    let api = caches(&client, &ns);
    for name in &names {
        api.delete(name, &DeleteParams::default()).await?;
    }
    for name in &names {
        wait_gone(&client, &ns, name).await?;
        let delete = format!("DELETE /caches/{ns}/{name}");
        ensure!(
            recorder.count(&delete) == 1,
            "{delete} reached the registry {} times",
            recorder.count(&delete)
        );
    }
    ensure!(
        recorder.requests().len() == 40,
        "the registry saw more than one PUT and one DELETE per Cache: {:?}",
        recorder.requests()
    );
    ensure!(host.is_running(), "the host died");
    Ok(())
}

async fn a_registry_that_is_down_blocks_registration_and_deletion_until_it_returns(
    env: Arc<TestEnv>,
    lang: Lang,
) -> anyhow::Result<()> {
    let mut recorder = Recorder::start().await?;
    let (client, ns, host) = registry_host(&env, "regdown", &recorder, lang).await?;
    let api = caches(&client, &ns);

    // Down while the Caches become Ready: Registered=False, retried.
    recorder.stop().await;
    for name in ["late", "tried"] {
        support::create_cache(&client, &ns, name, json!({"image": "redis:7.2"})).await?;
    }
    for name in ["late", "tried"] {
        wait_for(LONG, || async {
            let cache = api.get(name).await?;
            match registered(&cache) {
                Some((s, r, _)) if s == "False" && r == "RegistryUnavailable" => Ok(Some(())),
                other => bail!("Registered is {other:?}"),
            }
        })
        .await
        .with_context(|| host.log())?;
    }
    // A Cache whose registration was only tried may be in the registry
    // (a PUT that failed late can have landed): deleting it waits for a
    // DELETE too.
    api.delete("tried", &DeleteParams::default()).await?;
    wait_cleanup_blocked(&api, "tried").await?;
    recorder.start_again().await?;
    wait_registered(&client, &ns, "late").await?;
    wait_gone(&client, &ns, "tried").await?;
    ensure!(recorder.count(&format!("PUT /caches/{ns}/late")) == 1);
    ensure!(recorder.count(&format!("DELETE /caches/{ns}/tried")) == 1);
    ensure!(recorder.count(&format!("PUT /caches/{ns}/tried")) == 0);

    // Down during deletion: the Cache stays Terminating with CleanupBlocked.
    recorder.stop().await;
    api.delete("late", &DeleteParams::default()).await?;
    let message = wait_cleanup_blocked(&api, "late").await?;
    ensure!(
        message.contains(&format!("/caches/{ns}/late")),
        "the CleanupBlocked message names no URL: {message}"
    );
    let mut window = Window::new(Duration::from_secs(5));
    while window.next().await {
        let cache = api
            .get_opt("late")
            .await?
            .context("the Cache went while its registry was down")?;
        ensure!(
            cache.metadata.deletion_timestamp.is_some(),
            "the Cache is not Terminating"
        );
    }
    wait_for_event(&client, &ns, "late", "CleanupBlocked", LONG).await?;

    // Back: the finalizer completes and the children are collected.
    recorder.start_again().await?;
    wait_gone(&client, &ns, "late").await?;
    ensure!(recorder.count(&format!("DELETE /caches/{ns}/late")) == 1);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    wait_for(LONG, || async {
        Ok(deployments.get_opt("late").await?.is_none().then_some(()))
    })
    .await
    .context("the Deployment was not garbage-collected")?;
    Ok(())
}

async fn refused_hosts_redirects_metadata_and_rebinding_reach_nothing(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let recorder = Recorder::start().await?;
    let port = recorder.addr.port();
    let HostileHost {
        client,
        ns,
        mut host,
        ..
    } = HostileHost::build(&env, "outbound")
        // The exact address, and a name that resolves to it.
        .args([
            "--allow-outbound".to_owned(),
            format!("hostile=http://127.0.0.1:{port}"),
            "--allow-outbound".to_owned(),
            format!("hostile=http://localhost:{port}"),
        ])
        .start()
        .await?;

    // A granted origin is reached: the positive control.
    let ok = http_attack(
        &client,
        &ns,
        "granted",
        "http-get",
        &format!("{}/hello", recorder.url()),
    )
    .await?;
    ensure!(ok == "ok: 200 recorded", "granted request: {ok}");
    // The guest calls on every reconcile: only which requests arrive counts.
    let only = |allowed: &[&str]| {
        let seen = recorder.requests();
        ensure!(
            seen.iter().all(|r| allowed.contains(&r.as_str())),
            "a refused request reached the server: {seen:?}"
        );
        Ok(())
    };
    only(&["GET /hello"])?;

    // Each refused one fails in the guest, reaches nothing, and a Warning
    // Event names what was refused.
    let cases = [
        (
            "unlisted",
            "http-get",
            "http://example.com/x".to_owned(),
            "http://example.com:80",
        ),
        (
            "other-port",
            "http-get",
            format!("http://127.0.0.1:{}/x", port + 1),
            "127.0.0.1",
        ),
        (
            "metadata",
            "http-get",
            "http://169.254.169.254/latest/meta-data/".to_owned(),
            "169.254.169.254",
        ),
        (
            "rebind",
            "http-get",
            format!("http://localhost:{port}/x"),
            "127.0.0.1",
        ),
        (
            "redirect",
            "http-follow",
            format!(
                "{}/redirect?to=http://169.254.169.254/latest/meta-data/",
                recorder.url()
            ),
            "169.254.169.254",
        ),
    ];
    for (name, attack, target, _) in &cases {
        let status = http_attack(&client, &ns, name, attack, target).await?;
        ensure!(
            status.starts_with("error: refused by the host"),
            "{name}: the guest was not refused: {status}"
        );
    }
    for (name, _, _, needle) in &cases {
        let note = wait_for_event(&client, &ns, name, "OutboundRefused", LONG).await?;
        ensure!(
            note.contains(needle),
            "{name}: the Event does not name {needle:?}: {note}"
        );
    }
    only(&["GET /hello", "GET /redirect"])?;

    // A request that never answers ends at the guest's deadline (its
    // reconcile's 1 s): the guest gets a timeout, and the host keeps serving.
    let started = std::time::Instant::now();
    let hang = http_attack(
        &client,
        &ns,
        "hang",
        "http-get",
        &format!("{}/hang", recorder.url()),
    )
    .await?;
    ensure!(
        hang.starts_with("error: request failed") && hang.contains("Timeout"),
        "the hanging request did not end in a timeout: {hang}"
    );
    ensure!(
        started.elapsed() < Duration::from_secs(30),
        "the hanging request held its reconcile for {:?}",
        started.elapsed()
    );
    // One call makes at most 64 requests.
    let flood = http_attack(
        &client,
        &ns,
        "flood",
        "http-flood",
        &format!("{}/flood", recorder.url()),
    )
    .await?;
    ensure!(flood == "ok: 64 refused: 136", "the flood: {flood}");
    // A body past the cap ends in an error, not in host memory.
    let big = http_attack(
        &client,
        &ns,
        "big",
        "http-get",
        &format!("{}/big", recorder.url()),
    )
    .await?;
    ensure!(
        big.starts_with("error: request failed") && big.contains("body size exceeds limit"),
        "a 2 MiB body was not cut: {}",
        &big[..big.len().min(200)]
    );
    let ok = http_attack(
        &client,
        &ns,
        "after",
        "http-get",
        &format!("{}/after", recorder.url()),
    )
    .await?;
    ensure!(ok == "ok: 200 recorded", "after the hang: {ok}");
    only(&[
        "GET /hello",
        "GET /redirect",
        "GET /hang",
        "GET /flood",
        "GET /big",
        "GET /after",
    ])?;
    let metrics = support::http_get(host.endpoint("metrics").await?, "/metrics")
        .await?
        .1;
    let lines: Vec<&str> = metrics
        .lines()
        .filter(|l| l.contains("http_requests"))
        .collect();
    // Refused requests are counted without the host the guest chose, so a
    // guest cannot grow the label set; allowed ones under their entry.
    ensure!(
        metrics.contains("wasmop_guest_http_requests_total{guest=\"hostile\",method=\"GET\",host=\"(not allowed)\",code=\"refused\"}")
            && metrics.contains(&format!("wasmop_guest_http_requests_total{{guest=\"hostile\",method=\"GET\",host=\"http://127.0.0.1:{port}\",code=\"200\"}}"))
            && !metrics.contains("169.254"),
        "outbound requests in the metrics:\n{}",
        lines.join("\n")
    );
    ensure!(host.is_running(), "the host died");
    Ok(())
}

async fn render_makes_granted_calls_and_names_refused_ones(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let recorder = Recorder::start().await?;
    let parent = temp_file(
        &env,
        "render-hostile",
        &format!(
            "apiVersion: test.wasmop.dev/v1alpha1\nkind: Hostile\nmetadata: {{name: r, namespace: default}}\nspec: {{attack: http-get, target: \"{}/render\"}}\n",
            recorder.url()
        ),
    )?;
    let module = guest_module("hostile")?;
    let render = |extra: &[&str]| {
        tokio::process::Command::new(env!("CARGO_BIN_EXE_wasmop"))
            .arg("render")
            .arg("--guest")
            .arg(&module)
            .arg("--parent")
            .arg(&parent)
            .args(["-o", "json"])
            .args(extra)
            .output()
    };
    let denied = render(&[]).await?;
    let stdout: serde_json::Value = serde_json::from_slice(&denied.stdout)
        .with_context(|| String::from_utf8_lossy(&denied.stderr).into_owned())?;
    let stderr = String::from_utf8_lossy(&denied.stderr);
    let url = format!("{}/render", recorder.url());
    ensure!(
        stderr.contains(&format!("refused GET {url}")) && stderr.contains("--allow-outbound"),
        "render did not say which URL it refused: {stderr}"
    );
    ensure!(
        stdout["refused"][0]
            .as_str()
            .is_some_and(|r| r.contains(&url)),
        "{stdout}"
    );
    ensure!(recorder.requests().is_empty(), "{:?}", recorder.requests());

    let granted = render(&["--allow-outbound", &recorder.url()]).await?;
    ensure!(
        granted.status.success(),
        "{}",
        String::from_utf8_lossy(&granted.stderr)
    );
    let stdout: serde_json::Value = serde_json::from_slice(&granted.stdout)?;
    ensure!(stdout["status"]["http"] == "ok: 200 recorded", "{stdout}");
    ensure!(stdout.get("refused").is_none(), "{stdout}");
    ensure!(
        recorder.requests() == ["GET /render"],
        "{:?}",
        recorder.requests()
    );

    // HTTPS, verified against the trust store: the control plane's API
    // server is a real TLS server, its CA known only through SSL_CERT_FILE.
    let api = env.api_server_url().trim_end_matches('/').to_owned();
    let https_parent = temp_file(
        &env,
        "render-https",
        &format!(
            "apiVersion: test.wasmop.dev/v1alpha1\nkind: Hostile\nmetadata: {{name: r, namespace: default}}\nspec: {{attack: http-get, target: \"{api}/version\"}}\n"
        ),
    )?;
    let ca = env
        .temp_dir()
        .join(format!("api-ca-{}.pem", std::process::id()));
    std::fs::write(&ca, api_server_ca(&env)?)?;
    let https = |trust: &std::path::Path| {
        tokio::process::Command::new(env!("CARGO_BIN_EXE_wasmop"))
            .arg("render")
            .arg("--guest")
            .arg(&module)
            .arg("--parent")
            .arg(&https_parent)
            .args(["-o", "json", "--allow-outbound", &api])
            .env("SSL_CERT_FILE", trust)
            .env_remove("SSL_CERT_DIR")
            .output()
    };
    let trusted = https(&ca).await?;
    let out: serde_json::Value = serde_json::from_slice(&trusted.stdout)
        .with_context(|| String::from_utf8_lossy(&trusted.stderr).into_owned())?;
    let answer = out["status"]["http"].as_str().unwrap_or_default();
    ensure!(
        answer.starts_with("ok: "),
        "HTTPS with the CA trusted: {answer}"
    );
    let untrusted = https(&env.temp_dir().join("no-such-ca.pem")).await?;
    let out: serde_json::Value = serde_json::from_slice(&untrusted.stdout)
        .with_context(|| String::from_utf8_lossy(&untrusted.stderr).into_owned())?;
    let answer = out["status"]["http"].as_str().unwrap_or_default();
    ensure!(
        answer.starts_with("error: request failed") && answer.to_lowercase().contains("tls"),
        "HTTPS to a server the trust store does not know: {answer}"
    );

    // The log-only build refuses a registry it could not call.
    let log_only = tokio::process::Command::new(env!("CARGO_BIN_EXE_wasmop"))
        .arg("render")
        .arg("--guest")
        .arg(guest_module("cache-operator")?)
        .arg("--parent")
        .arg(workspace().join("deploy/samples/cache.yaml"))
        .arg("--settings")
        .arg(temp_file(
            &env,
            "render-registry",
            &format!("registryUrl: {}\n", recorder.url()),
        )?)
        .output()
        .await?;
    ensure!(
        !log_only.status.success()
            && String::from_utf8_lossy(&log_only.stderr).contains("cache-operator-registry"),
        "{}",
        String::from_utf8_lossy(&log_only.stderr)
    );

    let bad = render(&["--allow-outbound", "http://*"]).await?;
    ensure!(!bad.status.success(), "an invalid entry was accepted");
    ensure!(
        String::from_utf8_lossy(&bad.stderr)
            .contains("invalid allowedOutboundHosts entry \"http://*\""),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
    Ok(())
}

/// The API server's CA certificate (PEM), from the env's kubeconfig.
fn api_server_ca(env: &TestEnv) -> anyhow::Result<Vec<u8>> {
    let config = kube::config::Kubeconfig::read_from(env.kubeconfig_path())?;
    let cluster = config
        .clusters
        .first()
        .and_then(|c| c.cluster.as_ref())
        .context("the kubeconfig has no cluster")?;
    if let Some(data) = &cluster.certificate_authority_data {
        use base64::Engine as _;
        return Ok(base64::engine::general_purpose::STANDARD.decode(data)?);
    }
    let path = cluster
        .certificate_authority
        .as_ref()
        .context("the kubeconfig names no CA")?;
    Ok(std::fs::read(path)?)
}

/// The tests of this module.
pub fn tests() -> Vec<Test> {
    let mut tests = Vec::new();
    for lang in Lang::ALL {
        tests.extend(
            per_language![lang;
                twenty_caches_register_once_when_ready_and_deregister_once_on_delete,
                a_registry_that_is_down_blocks_registration_and_deletion_until_it_returns,
            ]
            .into_iter()
            .map(|test| test.with_timeout(Duration::from_secs(400))),
        );
    }
    tests.extend(wasmop_testenv::tests![
        refused_hosts_redirects_metadata_and_rebinding_reach_nothing => Duration::from_secs(300),
        render_makes_granted_calls_and_names_refused_ones,
    ]);
    tests
}
