//! End to end on the real control plane and a real OCI registry (the CNCF
//! distribution registry, `wasmop_testenv::Registry`): guests listed by an
//! `oci` reference, published with `wasmop push`, following their tag.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::json;
use wasmop_testenv::Window;
use wasmop_testenv::harness::Test;
use wasmop_testenv::{BasicAuth, Registry, TestEnv};

use crate::support;
use crate::support::guests::{Entry, GuestList};
use crate::support::{
    HostProcess, events_about, guest_module, install_cache_crd, install_yaml, put_guest_list,
    wait_for, wait_for_event, wait_ready, workspace,
};

const LONG: Duration = Duration::from_secs(120);
const LIST: &str = "wasmop-guests";
/// The entries' `ociPollInterval`.
const POLL: Duration = Duration::from_secs(2);

/// `wasmop push <module> <reference> --insecure`, with credentials on stdin
/// when `auth` is given; returns the digest it printed.
pub(crate) fn push(
    module: &std::path::Path,
    reference: &str,
    auth: Option<&BasicAuth>,
) -> anyhow::Result<String> {
    use std::io::Write as _;
    let mut command = Command::new(env!("CARGO_BIN_EXE_wasmop"));
    command
        .args(["push", "--insecure"])
        .arg(module)
        .arg(reference)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(auth) = auth {
        command.args(["--username", &auth.username, "--password-stdin"]);
    }
    let mut child = command.spawn().context("starting wasmop push")?;
    let mut stdin = child.stdin.take().context("stdin")?;
    if let Some(auth) = auth {
        writeln!(stdin, "{}", auth.password)?;
    }
    drop(stdin);
    let out = child.wait_with_output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    ensure!(
        out.status.success(),
        "wasmop push {reference} failed: {}{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    // `pushed <reference> (<n> bytes) as sha256:<hex>`
    let digest = stdout
        .trim()
        .rsplit(" as ")
        .next()
        .filter(|d| d.starts_with("sha256:") && d.len() == 71)
        .with_context(|| format!("no digest in {stdout:?}"))?;
    Ok(digest.to_owned())
}

/// The cache operator pulled from `reference` over plain HTTP, the tag
/// resolved again every [`POLL`].
fn entry(reference: &str, ns: &str) -> Entry {
    Entry::oci("cache-operator", reference)
        .with("insecure", true)
        .with("ociPollInterval", format!("{}s", POLL.as_secs()))
        .namespaces([ns])
}

/// CRDs, a namespace with a guest list, and a host following it.
async fn setup(
    env: &TestEnv,
    prefix: &str,
    guest: impl Fn(&str) -> Entry,
) -> anyhow::Result<(Client, String, HostProcess)> {
    let client = env.client();
    install_cache_crd(&client).await?;
    let ns = env.create_namespace(prefix).await?;
    put_guest_list(&client, &ns, LIST, &GuestList::of([guest(&ns)]).yaml()).await?;
    let host = HostProcess::follow_list(env, &ns, LIST).await?;
    Ok((client, ns, host))
}

/// The `apps.example.com/version` label cache-operator v2 puts on its
/// Deployments ("v1" when absent).
pub(crate) async fn flavor_of(client: &Client, ns: &str, cache: &str) -> anyhow::Result<String> {
    let d = Api::<Deployment>::namespaced(client.clone(), ns)
        .get(cache)
        .await?;
    Ok(d.metadata
        .labels
        .and_then(|l| l.get("apps.example.com/version").cloned())
        .unwrap_or_else(|| "v1".into()))
}

async fn wait_flavor(client: &Client, ns: &str, cache: &str, flavor: &str) -> anyhow::Result<()> {
    wait_for(LONG, || async {
        let now = flavor_of(client, ns, cache).await.unwrap_or_default();
        if now == flavor {
            Ok(Some(()))
        } else {
            bail!("Deployment {cache} is from {now:?}, waiting for {flavor}")
        }
    })
    .await
}

async fn count_reason(client: &Client, ns: &str, reason: &str) -> anyhow::Result<usize> {
    Ok(events_about(client, ns, LIST)
        .await?
        .iter()
        .filter(|(_, r, _)| r == reason)
        .count())
}

async fn a_tag_pushed_again_swaps_the_guest_at_a_later_poll_without_a_restart(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let registry = Registry::start(None).await?;
    let reference = format!("{}/ops/cache-operator:stable", registry.address());
    push(&guest_module("cache-operator")?, &reference, None)?;
    let (client, ns, mut host) = setup(&env, "oci-tag", |ns| entry(&reference, ns)).await?;
    host.wait_for_log("started guest", LONG).await?;
    let pid = host.pid();
    for i in 0..3 {
        support::create_small_cache(&client, &ns, &format!("c{i}")).await?;
    }
    for i in 0..3 {
        wait_ready(&client, &ns, &format!("c{i}")).await?;
        ensure!(flavor_of(&client, &ns, &format!("c{i}")).await? == "v1");
    }

    push(&guest_module("cache-operator-v2")?, &reference, None)?;
    let pushed = Instant::now();
    wait_for(LONG, || async {
        Ok((count_reason(&client, &ns, "GuestSwapped").await? > 0).then_some(()))
    })
    .await?;
    // How fast is the swap bench's to measure (`cargo xtask bench swap`).
    println!(
        "oci: tag moved, guest swapped {:.2?} after the push (ociPollInterval {POLL:?})",
        pushed.elapsed()
    );
    for i in 0..3 {
        wait_flavor(&client, &ns, &format!("c{i}"), "v2").await?;
    }
    ensure!(host.is_running() && host.pid() == pid, "the host restarted");

    // Resolving the same digest again fetches nothing: no second swap over
    // two more polls.
    let quiet = Instant::now();
    while quiet.elapsed() < POLL * 2 {
        ensure!(
            count_reason(&client, &ns, "GuestSwapped").await? == 1,
            "swapped again"
        );
        ensure!(count_reason(&client, &ns, "ModuleFetchFailed").await? == 0);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Ok(())
}

async fn a_pinned_digest_ignores_the_tag_and_a_wrong_digest_or_artifact_keeps_the_running_version(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let registry = Registry::start(None).await?;
    let tag = format!("{}/ops/cache-operator:stable", registry.address());
    let v1 = push(&guest_module("cache-operator")?, &tag, None)?;
    let repository = tag.trim_end_matches(":stable").to_owned();
    let pinned = format!("{repository}@{v1}");
    let (client, ns, mut host) = setup(&env, "oci-pin", |ns| entry(&pinned, ns)).await?;
    host.wait_for_log("started guest", LONG).await?;
    support::create_small_cache(&client, &ns, "a").await?;
    wait_ready(&client, &ns, "a").await?;

    push(&guest_module("cache-operator-v2")?, &tag, None)?;
    let mut window = Window::new(POLL * 3);
    while window.next().await {
        ensure!(
            count_reason(&client, &ns, "GuestSwapped").await? == 0,
            "a pinned digest followed the tag"
        );
    }
    support::create_small_cache(&client, &ns, "b").await?;
    wait_ready(&client, &ns, "b").await?;
    ensure!(flavor_of(&client, &ns, "b").await? == "v1");

    // The tag, now v2, with the sha256 of a different module.
    let wrong = support::sha256_hex(&std::fs::read(guest_module("hostile")?)?);
    let pinned = entry(&tag, &ns).with("sha256", wrong.as_str());
    put_guest_list(&client, &ns, LIST, &GuestList::of([pinned]).yaml()).await?;
    let note = wait_for_event(&client, &ns, LIST, "DigestMismatch", LONG).await?;
    ensure!(note.contains(&wrong), "{note}");
    // The failed entry is tried again at every poll, from the module it
    // pulled: each blob is fetched once.
    let mut window = Window::new(POLL * 3);
    while window.next().await {
        for module in ["cache-operator", "cache-operator-v2"] {
            let layer = support::sha256_hex(&std::fs::read(guest_module(module)?)?);
            let gets = registry.gets(&format!("/v2/ops/cache-operator/blobs/sha256:{layer}"))?;
            ensure!(gets == 1, "the layer of {module} was fetched {gets} times");
        }
    }
    support::create_small_cache(&client, &ns, "c").await?;
    wait_ready(&client, &ns, "c").await?;
    ensure!(
        flavor_of(&client, &ns, "c").await? == "v1",
        "a module with the wrong sha256 was loaded"
    );

    // A hostile registry: a container image where a wasm artifact belongs.
    let image = format!("{repository}:image");
    let reference: oci_client::Reference = image.parse()?;
    let layer = oci_client::client::ImageLayer::new(
        std::fs::read(guest_module("cache-operator-v2")?)?,
        "application/vnd.oci.image.layer.v1.tar".into(),
        None,
    );
    let config = oci_client::client::Config::new(
        b"{}".to_vec(),
        "application/vnd.oci.image.config.v1+json".into(),
        None,
    );
    let client_config = oci_client::client::ClientConfig {
        protocol: oci_client::client::ClientProtocol::Http,
        ..Default::default()
    };
    wasmop_host::client::install_crypto_provider();
    oci_client::Client::new(client_config)
        .push(
            &reference,
            &[layer],
            config,
            &oci_client::secrets::RegistryAuth::Anonymous,
            None,
        )
        .await?;
    put_guest_list(
        &client,
        &ns,
        LIST,
        &GuestList::of([entry(&image, &ns)]).yaml(),
    )
    .await?;
    wait_for(LONG, || async {
        let events = events_about(&client, &ns, LIST).await?;
        Ok(events
            .iter()
            .any(|(_, r, note)| r == "ModuleFetchFailed" && note.contains("not a wasm artifact"))
            .then_some(()))
    })
    .await
    .context("an image was not refused as a module")?;
    support::create_small_cache(&client, &ns, "d").await?;
    wait_ready(&client, &ns, "d").await?;
    ensure!(flavor_of(&client, &ns, "d").await? == "v1");

    // A plain-HTTP registry without `insecure: true`: the host speaks only
    // TLS to it, and so does `wasmop push` without `--insecure`.
    let secure_only = GuestList::of([entry(&tag, &ns).without("insecure")]).yaml();
    put_guest_list(&client, &ns, LIST, &secure_only).await?;
    // (The Event joins the ModuleFetchFailed series above: its note stays
    // the first one's, so the host's log is what names this failure.)
    host.wait_for_log(&format!("cannot fetch oci {tag}"), LONG)
        .await
        .context("a plain-HTTP registry was used without insecure: true")?;
    support::create_small_cache(&client, &ns, "e").await?;
    wait_ready(&client, &ns, "e").await?;
    ensure!(flavor_of(&client, &ns, "e").await? == "v1");
    let out = Command::new(env!("CARGO_BIN_EXE_wasmop"))
        .arg("push")
        .arg(guest_module("cache-operator")?)
        .arg(format!("{repository}:secure-only"))
        .stdin(Stdio::null())
        .output()?;
    ensure!(
        !out.status.success(),
        "wasmop push reached a plain-HTTP registry without --insecure"
    );
    ensure!(host.is_running());
    Ok(())
}

async fn a_stopped_registry_keeps_the_running_version_and_is_followed_again_when_back(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let mut registry = Registry::start(None).await?;
    let reference = format!("{}/ops/cache-operator:stable", registry.address());
    push(&guest_module("cache-operator")?, &reference, None)?;
    let (client, ns, mut host) = setup(&env, "oci-down", |ns| entry(&reference, ns)).await?;
    host.wait_for_log("started guest", LONG).await?;
    let pid = host.pid();

    registry.stop();
    let note = wait_for_event(&client, &ns, LIST, "ModuleFetchFailed", LONG).await?;
    ensure!(note.contains("running version is kept"), "{note}");
    support::create_small_cache(&client, &ns, "during").await?;
    wait_ready(&client, &ns, "during").await?;
    ensure!(flavor_of(&client, &ns, "during").await? == "v1");
    let mut window = Window::new(POLL * 3);
    while window.next().await {
        ensure!(
            count_reason(&client, &ns, "ModuleFetchFailed").await? == 1,
            "the same failure was recorded more than once"
        );
    }

    // Back, empty (in-memory storage): a missing tag is the same failure
    // streak; a push is followed.
    registry.start_again().await?;
    tokio::time::sleep(POLL * 2).await;
    push(&guest_module("cache-operator-v2")?, &reference, None)?;
    wait_flavor(&client, &ns, "during", "v2").await?;
    ensure!(host.is_running() && host.pid() == pid, "the host restarted");
    Ok(())
}

async fn a_registry_behind_basic_auth_is_pulled_with_the_pull_secret(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let auth = BasicAuth {
        username: "ci".into(),
        password: "s3cret:with-colon".into(),
    };
    let registry = Registry::start(Some(auth.clone())).await?;
    let reference = format!("{}/private/cache-operator:v1", registry.address());
    ensure!(
        push(&guest_module("cache-operator")?, &reference, None).is_err(),
        "an anonymous push was accepted"
    );
    push(&guest_module("cache-operator")?, &reference, Some(&auth))?;

    let (client, ns, mut host) = setup(&env, "oci-auth", |ns| entry(&reference, ns)).await?;
    let note = wait_for_event(&client, &ns, LIST, "ModuleFetchFailed", LONG).await?;
    ensure!(note.contains("private/cache-operator"), "{note}");

    use base64::Engine as _;
    let basic = base64::engine::general_purpose::STANDARD
        .encode(format!("{}:{}", auth.username, auth.password));
    let config = json!({"auths": {registry.address(): {"auth": basic}}});
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "regcred"},
        "type": "kubernetes.io/dockerconfigjson",
        "stringData": {".dockerconfigjson": config.to_string()},
    }))?;
    Api::<Secret>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &secret)
        .await?;
    // With the Secret, beside the cache-operator, the hostile guest from the
    // same registry, which will try to take the pull Secret.
    install_yaml(&client, &workspace().join("guests/hostile/crd.yaml")).await?;
    let hostile = format!("{}/private/hostile:v1", registry.address());
    push(&guest_module("hostile")?, &hostile, Some(&auth))?;
    let list = GuestList::of([
        entry(&reference, &ns).with("pullSecret", "regcred"),
        Entry::oci("hostile", &hostile)
            .with("insecure", true)
            .with("pullSecret", "regcred")
            .namespaces([&ns]),
    ]);
    put_guest_list(&client, &ns, LIST, &list.yaml()).await?;
    host.wait_for_log("started guest", LONG).await?;
    support::create_small_cache(&client, &ns, "a").await?;
    wait_ready(&client, &ns, "a").await?;

    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let before = secrets.get("regcred").await?.metadata.resource_version;
    let attack: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "test.wasmop.dev/v1alpha1", "kind": "Hostile",
        "metadata": {"name": "steal-pull-secret"},
        "spec": {"attack": "take-secret", "target": "regcred"},
    }))?;
    support::hostiles(&client, &ns)
        .create(&PostParams::default(), &attack)
        .await?;
    let note = wait_for_event(&client, &ns, "steal-pull-secret", "ProtectedObject", LONG).await?;
    ensure!(note.contains("regcred"), "{note}");
    ensure!(
        secrets.get("regcred").await?.metadata.resource_version == before,
        "the pull Secret was written"
    );
    ensure!(
        !host.log().contains(&auth.password),
        "the password reached the log"
    );
    Ok(())
}

/// A valid component of `payload` more bytes: `module` with a custom
/// section appended.
fn with_custom_section(mut module: Vec<u8>, payload: usize) -> Vec<u8> {
    use wasm_encoder::{ComponentSection, CustomSection};
    CustomSection {
        name: "wasmop-test-padding".into(),
        data: vec![0x5a; payload].into(),
    }
    .append_to_component(&mut module);
    module
}

async fn a_fifteen_megabyte_module_loads_from_oci(env: Arc<TestEnv>) -> anyhow::Result<()> {
    let registry = Registry::start(None).await?;
    let module = with_custom_section(std::fs::read(guest_module("cache-operator")?)?, 15 << 20);
    let file = env.temp_dir().join("cache-operator-15mib.wasm");
    std::fs::write(&file, &module)?;
    let reference = format!("{}/ops/large:v1", registry.address());
    push(&file, &reference, None)?;
    let (client, ns, mut host) = setup(&env, "oci-large", |ns| entry(&reference, ns)).await?;
    host.wait_for_log("started guest", LONG).await?;
    support::create_small_cache(&client, &ns, "a").await?;
    wait_ready(&client, &ns, "a").await?;
    let note = wait_for_event(&client, &ns, LIST, "GuestStarted", LONG).await?;
    ensure!(note.contains(&support::sha256_hex(&module)[..12]), "{note}");
    Ok(())
}

/// The tests of this module.
pub fn tests() -> Vec<Test> {
    // Each case waits for several polls, swaps and rollouts in turn.
    wasmop_testenv::tests![
        a_tag_pushed_again_swaps_the_guest_at_a_later_poll_without_a_restart,
        a_pinned_digest_ignores_the_tag_and_a_wrong_digest_or_artifact_keeps_the_running_version,
        a_stopped_registry_keeps_the_running_version_and_is_followed_again_when_back,
        a_registry_behind_basic_auth_is_pulled_with_the_pull_secret,
        a_fifteen_megabyte_module_loads_from_oci,
    ]
    .into_iter()
    .map(|test| test.with_timeout(Duration::from_secs(300)))
    .collect()
}
