//! End to end on the real control plane: guests listed in a ConfigMap and
//! hot-swapped without restarting the host (issue: guests listed in a
//! ConfigMap and hot-swapped).

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use wasmop_testenv::TestEnv;
use wasmop_testenv::Window;
use wasmop_testenv::harness::Test;

use crate::support;
use crate::support::guests::{Entry, GuestList};
use crate::support::{
    HostProcess, caches, guest_module, install_cache_crd, install_yaml, put_guest_list, put_module,
    wait_for, wait_for_event, workspace,
};

const LONG: Duration = Duration::from_secs(120);
const LIST: &str = "wasmop-guests";

/// Puts the built guest `flavor` (`cache-operator` or `cache-operator-v2`)
/// into the module ConfigMap the guest list names.
async fn use_version(client: &Client, ns: &str, flavor: &str) -> anyhow::Result<()> {
    let module = std::fs::read(guest_module(flavor)?)?;
    put_module(client, ns, "cache-module", "module.wasm", &module).await
}

fn cache_entry(ns: &str) -> Entry {
    Entry::cache_operator(ns).with("concurrency", 8)
}

/// CRDs, a namespace holding the guest list with cache-operator v1, and a
/// host following that list.
async fn setup(env: &TestEnv, prefix: &str) -> anyhow::Result<(Client, String, HostProcess)> {
    setup_caching(env, prefix, false).await
}

/// [`setup`], the host with a compiled-module cache of its own when
/// `compiling` (it compiles every module it is given).
async fn setup_caching(
    env: &TestEnv,
    prefix: &str,
    compiling: bool,
) -> anyhow::Result<(Client, String, HostProcess)> {
    let client = env.client();
    install_cache_crd(&client).await?;
    let ns = env.create_namespace(prefix).await?;
    use_version(&client, &ns, "cache-operator").await?;
    put_guest_list(
        &client,
        &ns,
        LIST,
        &GuestList::of([cache_entry(&ns)]).yaml(),
    )
    .await?;
    let mut host = if compiling {
        HostProcess::follow_list_compiling(env, &ns, LIST).await?
    } else {
        HostProcess::follow_list(env, &ns, LIST).await?
    };
    host.wait_for_log("started guest", LONG).await?;
    Ok((client, ns, host))
}

async fn create_cache(client: &Client, ns: &str, name: &str) -> anyhow::Result<()> {
    support::create_cache(
        client,
        ns,
        name,
        json!({"image": "redis:7.2", "replicas": 1, "config": {"round": "0"}}),
    )
    .await
}

fn has_v2_label(labels: Option<&std::collections::BTreeMap<String, String>>) -> bool {
    labels
        .and_then(|l| l.get("apps.example.com/version"))
        .map(String::as_str)
        == Some("v2")
}

async fn a_v1_to_v2_swap_under_load_converges_fifty_caches_without_a_restart(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let (client, ns, mut host) = setup(&env, "swap").await?;
    let pid = host.pid();
    const N: usize = 50;
    for i in 0..N {
        create_cache(&client, &ns, &format!("c{i}")).await?;
    }
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    wait_for(LONG, || async {
        let n = deployments.list(&ListParams::default()).await?.items.len();
        if n == N {
            Ok(Some(()))
        } else {
            bail!("{n} of {N} Deployments")
        }
    })
    .await?;

    // Keep updating Caches while the swap happens.
    let updater = {
        let api = caches(&client, &ns);
        tokio::spawn(async move {
            for round in 1..=5 {
                for i in (0..N).step_by(5) {
                    let patch = json!({"spec": {"config": {"round": round.to_string()}}});
                    let _ = api
                        .patch(
                            &format!("c{i}"),
                            &PatchParams::default(),
                            &Patch::Merge(&patch),
                        )
                        .await;
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        })
    };
    use_version(&client, &ns, "cache-operator-v2").await?;
    updater.await?;

    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), &ns);
    wait_for(LONG, || async {
        let d = deployments.list(&ListParams::default()).await?.items;
        let v2 = d
            .iter()
            .filter(|d| has_v2_label(d.metadata.labels.as_ref()))
            .count();
        let cms = configmaps
            .list(&ListParams::default().labels("apps.example.com/version=v2"))
            .await?
            .items
            .len();
        let p = pdbs.list(&ListParams::default()).await?.items.len();
        if v2 == N && cms == N && p == N {
            Ok(Some(()))
        } else {
            bail!("v2 Deployments {v2}/{N}, v2 ConfigMaps {cms}/{N}, PDBs {p}/{N}")
        }
    })
    .await
    .context("not every Cache converged to v2")?;

    // The updates made during the swap were applied too.
    let cm = configmaps.get("c0-config").await?;
    ensure!(
        cm.data.unwrap_or_default().get("round").map(String::as_str) == Some("5"),
        "last update lost"
    );
    ensure!(
        host.is_running() && host.pid() == pid,
        "the host process restarted"
    );
    let log = host.log();
    ensure!(log.contains("swapped guest module"), "no swap logged");
    ensure!(
        !log.contains("reconcile failed"),
        "a reconcile failed during the swap:\n{}",
        support::tail(&log, 40)
    );
    wait_for_event(&client, &ns, LIST, "GuestSwapped", LONG).await?;
    Ok(())
}

async fn a_second_guest_is_added_and_removed_at_runtime(env: Arc<TestEnv>) -> anyhow::Result<()> {
    let (client, ns, mut host) = setup(&env, "second").await?;
    install_yaml(&client, &workspace().join("guests/hostile/crd.yaml")).await?;
    support::put_hostile_module(&client, &ns).await?;
    let list = GuestList::of([cache_entry(&ns), Entry::hostile(&ns)]);
    put_guest_list(&client, &ns, LIST, &list.yaml()).await?;
    host.wait_for_log("started guest guest=hostile", LONG)
        .await
        .or_else(|_| {
            if host.log().contains("hostile") && host.log().contains("started guest") {
                Ok(())
            } else {
                bail!("second guest never started:\n{}", host.log())
            }
        })?;
    let hostiles = support::hostiles(&client, &ns);
    let make = |name: &str| {
        serde_json::from_value::<kube::api::DynamicObject>(json!({
        "apiVersion": "test.wasmop.dev/v1alpha1", "kind": "Hostile", "metadata": {"name": name}, "spec": {"attack": "none"}})).unwrap()
    };
    hostiles.create(&PostParams::default(), &make("h1")).await?;
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    wait_for(LONG, || async {
        Ok(configmaps.get_opt("h1-ok").await?.map(|_| ()))
    })
    .await
    .context("second guest did not reconcile")?;

    // Remove it again: its controller stops, its objects stay.
    put_guest_list(
        &client,
        &ns,
        LIST,
        &GuestList::of([cache_entry(&ns)]).yaml(),
    )
    .await?;
    wait_for_event(&client, &ns, LIST, "GuestStopped", LONG).await?;
    hostiles.create(&PostParams::default(), &make("h2")).await?;
    let mut window = Window::new(Duration::from_secs(4));
    while window.next().await {
        ensure!(
            configmaps.get_opt("h2-ok").await?.is_none(),
            "a removed guest still reconciles"
        );
        ensure!(
            configmaps.get_opt("h1-ok").await?.is_some(),
            "a removed guest's objects must stay"
        );
    }
    // The first guest is unaffected.
    create_cache(&client, &ns, "still").await?;
    wait_for(LONG, || async {
        Ok(configmaps.get_opt("still-config").await?.map(|_| ()))
    })
    .await?;
    Ok(())
}

async fn bad_updates_leave_v1_running_and_record_a_warning(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let (client, ns, mut host) = setup(&env, "corrupt").await?;
    let pid = host.pid();
    // Not wasm at all.
    put_module(
        &client,
        &ns,
        "cache-module",
        "module.wasm",
        b"definitely not a component",
    )
    .await?;
    let note = wait_for_event(&client, &ns, LIST, "InvalidModule", LONG).await?;
    ensure!(
        note.contains("not a valid WebAssembly component")
            && note.contains("previous version keeps running"),
        "event note: {note}"
    );
    // A digest mismatch: first pin a digest nothing matches, then put a
    // valid module in place (in this order, so the module is never loadable
    // without the pin).
    let wrong = "0".repeat(64);
    let pinned = cache_entry(&ns).with("sha256", wrong);
    put_guest_list(&client, &ns, LIST, &GuestList::of([pinned]).yaml()).await?;
    use_version(&client, &ns, "cache-operator-v2").await?;
    wait_for(LONG, || async {
        let events = support::events_about(&client, &ns, LIST).await?;
        Ok(events
            .iter()
            .any(|(_, r, n)| r == "DigestMismatch" && n.contains("digest mismatch"))
            .then_some(()))
    })
    .await
    .context("no digest mismatch warning")?;
    // Broken YAML.
    put_guest_list(&client, &ns, LIST, "guests: [unclosed").await?;
    wait_for_event(&client, &ns, LIST, "InvalidGuestList", LONG).await?;

    // v1 still serves: a new Cache gets v1 children (no v2 label).
    create_cache(&client, &ns, "after").await?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let d = wait_for(LONG, || async { Ok(deployments.get_opt("after").await?) }).await?;
    ensure!(
        !has_v2_label(d.metadata.labels.as_ref()),
        "a rejected update took effect"
    );
    ensure!(host.is_running() && host.pid() == pid, "host restarted");
    // The next good change is tried again.
    put_guest_list(
        &client,
        &ns,
        LIST,
        &GuestList::of([cache_entry(&ns)]).yaml(),
    )
    .await?;
    wait_for(LONG, || async {
        let d = deployments.get("after").await?;
        Ok(has_v2_label(d.metadata.labels.as_ref()).then_some(()))
    })
    .await
    .context("a good update after bad ones was not applied")?;
    Ok(())
}

/// Serves `body` over plain HTTP on 127.0.0.1 for every request, forever.
/// Serves `body` over HTTP on a free port; returns the address and the
/// number of requests served so far.
async fn serve(
    body: Vec<u8>,
) -> anyhow::Result<(std::net::SocketAddr, Arc<std::sync::atomic::AtomicUsize>)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let body = Arc::new(body);
    let served = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = served.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let body = body.clone();
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = socket.read(&mut buf).await;
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\ncontent-type: application/wasm\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = socket.write_all(head.as_bytes()).await;
                let _ = socket.write_all(&body).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    Ok((addr, served))
}

async fn a_url_module_with_its_digest_is_loaded_and_an_unreachable_url_keeps_the_old_version(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let (client, ns, mut host) = setup(&env, "url").await?;
    let v2 = std::fs::read(guest_module("cache-operator-v2")?)?;
    let digest = wasmop_host::runtime::cache::digest(&v2);
    let (addr, served) = serve(v2).await?;
    let url_entry = |url: &str| Entry::url("cache-operator", url, &digest).namespaces([&ns]);
    let use_url_beside = |url: String, beside: Option<Entry>| {
        let list = GuestList::of([url_entry(&url)].into_iter().chain(beside)).yaml();
        let client = client.clone();
        let ns = ns.clone();
        async move { put_guest_list(&client, &ns, LIST, &list).await }
    };
    let use_url = |url: String| use_url_beside(url, None);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    // A new Cache shows which version runs: v2 children carry the v2 label.
    let runs_v2 = |name: &'static str| {
        let (client, ns, deployments) = (client.clone(), ns.clone(), deployments.clone());
        async move {
            create_cache(&client, &ns, name).await?;
            let d = wait_for(LONG, || async { Ok(deployments.get_opt(name).await?) }).await?;
            anyhow::Ok(has_v2_label(d.metadata.labels.as_ref()))
        }
    };
    use_url(format!("http://{addr}/cache-operator-v2.wasm")).await?;
    host.wait_for_log("swapped guest module", LONG).await?;
    ensure!(
        runs_v2("from-url").await?,
        "the module from the URL is not the one running"
    );
    // Another entry joins the list: the URL entry did not change, so its
    // module is not downloaded again.
    support::put_hostile_module(&client, &ns).await?;
    install_yaml(&client, &workspace().join("guests/hostile/crd.yaml")).await?;
    use_url_beside(
        format!("http://{addr}/cache-operator-v2.wasm"),
        Some(Entry::hostile(&ns)),
    )
    .await?;
    host.wait_for_log("guest=hostile", LONG).await?;
    ensure!(
        served.load(std::sync::atomic::Ordering::SeqCst) == 1,
        "the unchanged URL module was downloaded {} times",
        served.load(std::sync::atomic::Ordering::SeqCst)
    );

    // Nothing listens on this port any more: the fetch fails, v2 keeps running.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    use_url(format!("http://{closed}/gone.wasm")).await?;
    let note = wait_for_event(&client, &ns, LIST, "ModuleFetchFailed", LONG).await?;
    ensure!(note.contains(&closed.to_string()), "event note: {note}");
    ensure!(
        runs_v2("after-outage").await?,
        "the running version changed after a failed fetch"
    );
    ensure!(host.is_running(), "host died");
    Ok(())
}

/// `elapsed_us=N` of the first log line containing `needle` after `from`.
fn elapsed_after(log: &str, from: usize, needle: &str) -> Option<(u64, usize)> {
    let idx = log[from..].find(needle)? + from;
    let line = log[idx..].lines().next()?;
    let start = line.find("elapsed_us=")? + "elapsed_us=".len();
    let digits: String = line[start..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    Some((digits.parse().ok()?, idx + line.len()))
}

async fn swapping_back_to_a_known_version_hits_the_compiled_cache(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let (client, ns, mut host) = setup_caching(&env, "back", true).await?;
    use_version(&client, &ns, "cache-operator-v2").await?;
    host.wait_for_log("swapped guest module", LONG).await?;
    let first_swap = host.log().find("swapped guest module").context("swap")?;
    use_version(&client, &ns, "cache-operator").await?;
    wait_for(LONG, || async {
        Ok((host.log().matches("swapped guest module").count() >= 2).then_some(()))
    })
    .await?;
    let log = host.log();
    let (compile_v2, _) =
        elapsed_after(&log, 0, "cache=Miss").context("no compile of v2 logged")?;
    let back = &log[first_swap + 1..];
    let line = back
        .lines()
        .find(|l| l.contains("swapped guest module"))
        .context("second swap")?;
    ensure!(
        line.contains("cache=Memory"),
        "swap back did not hit the cache: {line}"
    );
    let (hit, _) = elapsed_after(line, 0, "cache=Memory").context("elapsed")?;
    ensure!(
        hit * 2 < compile_v2,
        "cache hit ({hit} us) is not clearly faster than compiling ({compile_v2} us)"
    );
    eprintln!("compile v2: {compile_v2} us, swap back from cache: {hit} us");
    // The swap's Event says how the module was obtained (the API server
    // folds the second GuestSwapped into the first, which keeps its note).
    let note = support::wait_for_event(&client, &ns, LIST, "GuestSwapped", LONG).await?;
    ensure!(
        note.contains("swapped to a new module version") && note.contains(", compiled in "),
        "the swap's Event does not say how the module was compiled: {note}"
    );
    Ok(())
}

/// A new build of the cache-operator that changes nothing the host can see
/// (same kinds, same settings) is swapped in place: the host reports the new
/// digest, and the watches that were running keep serving.
async fn a_rebuild_with_the_same_kinds_swaps_in_place_keeping_the_watches(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let (client, ns, mut host) = setup(&env, "inplace").await?;
    let pid = host.pid();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    create_cache(&client, &ns, "before").await?;
    wait_for(LONG, || async { Ok(deployments.get_opt("before").await?) }).await?;
    let watches_before = host.log().matches("controller started").count();

    // The same component under a new digest, as a rebuild gives.
    let mut rebuilt = std::fs::read(guest_module("cache-operator")?)?;
    wasm_encoder::ComponentSection::append_to_component(
        &wasm_encoder::CustomSection {
            name: "wasmop-test-rebuild".into(),
            data: b"1".into(),
        },
        &mut rebuilt,
    );
    let digest = wasmop_host::runtime::cache::digest(&rebuilt);
    put_module(&client, &ns, "cache-module", "module.wasm", &rebuilt).await?;
    host.wait_for_log("swapped guest module", LONG).await?;
    let log = host.log();
    let line = log
        .lines()
        .find(|l| l.contains("swapped guest module"))
        .context("swap line")?;
    ensure!(
        line.contains(&format!("to={}", &digest[..12])) && !line.contains("watches_restarted"),
        "not an in-place swap to the rebuilt module: {line}"
    );
    let note = wait_for_event(&client, &ns, LIST, "GuestSwapped", LONG).await?;
    ensure!(
        note.contains("swapped to a new module version")
            && note.contains(&digest[..12])
            && !note.contains("restarted"),
        "unexpected event: {note}"
    );

    // The watches that were running serve the new version.
    create_cache(&client, &ns, "after").await?;
    wait_for(LONG, || async { Ok(deployments.get_opt("after").await?) }).await?;
    let log = host.log();
    ensure!(
        log.matches("controller started").count() == watches_before,
        "the watches restarted:\n{}",
        support::tail(&log, 40)
    );
    ensure!(
        host.is_running() && host.pid() == pid,
        "the host process restarted"
    );
    Ok(())
}

async fn a_file_guest_keeps_running_while_the_guest_list_is_followed_too(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let client = env.client();
    install_cache_crd(&client).await?;
    install_yaml(&client, &workspace().join("guests/hostile/crd.yaml")).await?;
    let ns = env.create_namespace("both").await?;
    support::put_hostile_module(&client, &ns).await?;
    let hostile = GuestList::of([Entry::hostile(&ns)]);
    put_guest_list(&client, &ns, LIST, &hostile.yaml()).await?;
    let (_, kubeconfig) = support::admin_identity(&env, &format!("wasmop-{ns}")).await?;
    let mut host = HostProcess::start(
        &env,
        &kubeconfig,
        &ns,
        &[
            "--guest",
            &support::guest_arg("cache-operator")?,
            "--namespace",
            &ns,
            "--guests-configmap",
            &format!("{ns}/{LIST}"),
        ],
    )?;
    host.wait_for_log("guest=hostile", LONG).await?;
    create_cache(&client, &ns, "from-file").await?;
    wait_for(LONG, || async {
        let d: Api<Deployment> = Api::namespaced(client.clone(), &ns);
        Ok(d.get_opt("from-file").await?.map(|_| ()))
    })
    .await
    .context("the --guest guest stopped serving once the list was followed")?;
    // A list entry of the same name does not replace it either.
    put_module(
        &client,
        &ns,
        "cache-module",
        "module.wasm",
        &std::fs::read(guest_module("cache-operator-v2")?)?,
    )
    .await?;
    let both = hostile.and(cache_entry(&ns));
    put_guest_list(&client, &ns, LIST, &both.yaml()).await?;
    let note = wait_for_event(&client, &ns, LIST, "GuestLoadFailed", LONG).await?;
    ensure!(note.contains("already given by --guest"), "{note:?}");
    ensure!(
        !host.log().contains("stopped guest"),
        "a guest was stopped:\n{}",
        host.log()
    );
    Ok(())
}

/// `wasmop configmap`'s limit is the API server's: the largest module it
/// puts in a ConfigMap is stored, one byte more it refuses, naming the
/// other sources, as the API server refuses the same ConfigMap; a
/// TypeScript guest (12 MB) is refused and a Rust one printed.
async fn a_module_too_large_for_a_config_map_is_refused_as_the_api_server_would(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    use wasmop_host::source::fetch::{CONFIG_MAP_MAX_BYTES, module_config_map};
    let client = env.client();
    let ns = env.create_namespace("cm-size").await?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let key = "module.wasm";
    let fits = vec![7u8; CONFIG_MAP_MAX_BYTES];
    let stored = module_config_map(&ns, "fits", key, "fits", &fits)?;
    api.create(&PostParams::default(), &stored)
        .await
        .context("the API server refused the largest ConfigMap wasmop makes")?;
    let over = vec![7u8; CONFIG_MAP_MAX_BYTES + 1];
    let Err(refused) = module_config_map(&ns, "over", key, "over.wasm", &over) else {
        bail!("a module one byte over the limit was put in a ConfigMap");
    };
    let message = refused.to_string();
    for source in ["file:", "url:", "oci:"] {
        ensure!(message.contains(source), "{message}");
    }
    let mut too_big = stored.clone();
    too_big.metadata.name = Some("over".into());
    too_big.binary_data = Some([(key.to_owned(), k8s_openapi::ByteString(over))].into());
    match api.create(&PostParams::default(), &too_big).await {
        Err(kube::Error::Api(status)) if status.code == 422 => {}
        Err(e) => bail!("the API server refused the ConfigMap one byte over otherwise: {e}"),
        Ok(_) => bail!("the API server stored a ConfigMap one byte over wasmop's limit"),
    }

    let cli = |stem: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_wasmop"))
            .args(["configmap", "--name", stem, "--namespace", &ns])
            .arg(guest_module(stem).expect("built"))
            .output()
    };
    let out = cli("cache-operator-ts")?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(
        !out.status.success() && stderr.contains("more than a ConfigMap holds"),
        "{stderr}"
    );
    let out = cli("cache-operator")?;
    ensure!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed: ConfigMap = serde_saphyr::from_str(&String::from_utf8_lossy(&out.stdout))?;
    let module = std::fs::read(guest_module("cache-operator")?)?;
    ensure!(
        printed
            .binary_data
            .as_ref()
            .and_then(|d| d.get(key))
            .map(|b| &b.0)
            == Some(&module),
        "the printed ConfigMap does not hold the module"
    );
    api.create(&PostParams::default(), &printed).await?;
    Ok(())
}

/// The tests of this module.
pub fn tests() -> Vec<Test> {
    wasmop_testenv::tests![
        a_module_too_large_for_a_config_map_is_refused_as_the_api_server_would,
        a_v1_to_v2_swap_under_load_converges_fifty_caches_without_a_restart => Duration::from_secs(400),
        a_second_guest_is_added_and_removed_at_runtime,
        bad_updates_leave_v1_running_and_record_a_warning => Duration::from_secs(300),
        a_url_module_with_its_digest_is_loaded_and_an_unreachable_url_keeps_the_old_version,
        a_file_guest_keeps_running_while_the_guest_list_is_followed_too,
        swapping_back_to_a_known_version_hits_the_compiled_cache,
        a_rebuild_with_the_same_kinds_swaps_in_place_keeping_the_watches,
    ]
}
