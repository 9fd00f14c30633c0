//! End to end on the real control plane: a Cache's upgrade of `spec.image`
//! and its rollback, run once per language the cache-operator is written in
//! (`rust::<case>`, `ts::`, `python::`).
//!
//! A failed rollout is real: kwok keeps every Pod whose image contains
//! `never-ready` un-Ready (the harness's kwok Stage), and
//! kube-controller-manager's Deployment controller reports
//! `ProgressDeadlineExceeded` once the Deployment's `progressDeadlineSeconds`
//! (the Cache's `spec.upgrade.timeoutSeconds`) have passed without progress.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DynamicObject, Patch, PatchParams, WatchEvent, WatchParams};
use kube::{Client, ResourceExt as _};
use serde_json::{Value, json};
use wasmop_testenv::TestEnv;
use wasmop_testenv::harness::Test;

use crate::support;
use crate::support::lang::{LONG, Lang, per_language, setup, wait_phase};
use crate::support::{at, caches, create_cache, wait_for};

/// The image every case starts from.
const GOOD: &str = "redis:7.2";
/// The image a good upgrade goes to.
const NEWER: &str = "redis:7.4";
/// An image whose Pods kwok never makes Ready.
const NEVER_READY: &str = "redis:7.4-never-ready";
/// The shortest `spec.upgrade.timeoutSeconds` the CRD allows, so a rollback
/// comes as soon as it can.
const TIMEOUT_SECONDS: u64 = 30;
/// How long a case may run: a rollback waits out [`TIMEOUT_SECONDS`].
const CASE_TIMEOUT: Duration = Duration::from_secs(240);

/// A condition's `(status, reason, message)`.
type ConditionState = (String, String, String);

/// The condition `type_` of a Cache's status.
fn condition(cache: &DynamicObject, type_: &str) -> Option<ConditionState> {
    at(cache, "/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .map(|c| {
            let text = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
            (text("status"), text("reason"), text("message"))
        })
}

/// A status field of a Cache, as text.
fn status_text<'a>(cache: &'a DynamicObject, field: &str) -> Option<&'a str> {
    at(cache, &format!("/status/{field}")).and_then(Value::as_str)
}

/// Whether the host has reported on the Cache's latest generation.
fn at_generation(cache: &DynamicObject) -> bool {
    at(cache, "/status/observedGeneration").and_then(Value::as_i64) == cache.metadata.generation
}

/// The image of the Deployment's `cache` container.
fn template_image(deployment: &Deployment) -> Option<String> {
    deployment
        .spec
        .as_ref()?
        .template
        .spec
        .as_ref()?
        .containers
        .iter()
        .find(|c| c.name == "cache")?
        .image
        .clone()
}

/// Merges `spec` into the Cache's spec.
async fn patch_spec(client: &Client, ns: &str, name: &str, spec: Value) -> anyhow::Result<()> {
    caches(client, ns)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({ "spec": spec })),
        )
        .await?;
    Ok(())
}

/// Creates the Cache `name` running [`GOOD`] with `extra` in its spec and
/// waits until it is Ready with [`GOOD`] as its last good image. Its first
/// rollout is no upgrade: no `Upgrading` condition.
async fn create_ready(client: &Client, ns: &str, name: &str, extra: Value) -> anyhow::Result<()> {
    let mut spec = json!({"image": GOOD, "replicas": 1});
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    create_cache(client, ns, name, spec).await?;
    let api = caches(client, ns);
    let cache = wait_for(LONG, || async {
        let c = api.get(name).await?;
        Ok((status_text(&c, "lastGoodImage") == Some(GOOD)).then_some(c))
    })
    .await
    .with_context(|| format!("Cache {name} never recorded {GOOD} as its last good image"))?;
    ensure!(
        status_text(&cache, "phase") == Some("Ready"),
        "{:?}",
        at(&cache, "/status")
    );
    ensure!(
        condition(&cache, "Upgrading").is_none(),
        "a first rollout is no upgrade: {:?}",
        at(&cache, "/status")
    );
    Ok(())
}

/// Every state the Cache `name` takes from `version` on, as its watch
/// delivers them (so no status written in between is missed), until `done`
/// holds for one; that one last.
async fn states_until(
    api: &Api<DynamicObject>,
    name: &str,
    version: &str,
    timeout: Duration,
    done: impl Fn(&DynamicObject) -> bool,
) -> anyhow::Result<Vec<DynamicObject>> {
    let params = WatchParams::default()
        .fields(&format!("metadata.name={name}"))
        .timeout(290);
    let mut events = api.watch(&params, version).await?.boxed();
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let event = tokio::time::timeout_at(deadline, events.try_next())
            .await
            .with_context(|| {
                format!(
                    "timed out after {timeout:?}; the states seen: {:?}",
                    seen.iter()
                        .map(|c: &DynamicObject| at(c, "/status"))
                        .collect::<Vec<_>>()
                )
            })??;
        match event {
            Some(WatchEvent::Added(c) | WatchEvent::Modified(c)) => {
                let finished = done(&c);
                seen.push(c);
                if finished {
                    return Ok(seen);
                }
            }
            Some(WatchEvent::Error(e)) => bail!("the watch of Cache {name} failed: {e:?}"),
            Some(WatchEvent::Deleted(_)) => bail!("Cache {name} was deleted"),
            Some(WatchEvent::Bookmark(_)) => {}
            None => bail!("the watch of Cache {name} ended"),
        }
    }
}

/// The Events with `reason` about `name`, each as `(type, note, count)`
/// (a repeated Event is one object with a series).
async fn events_with_reason(
    client: &Client,
    ns: &str,
    name: &str,
    reason: &str,
) -> anyhow::Result<Vec<(String, String, i32)>> {
    let api: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), ns);
    Ok(api
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter(|e| {
            e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                && e.reason.as_deref() == Some(reason)
        })
        .map(|e| {
            (
                e.type_.unwrap_or_default(),
                e.note.unwrap_or_default(),
                e.series.map_or(1, |s| s.count),
            )
        })
        .collect())
}

/// Changes the image of the Ready Cache `name` (made with
/// `spec.upgrade.timeoutSeconds: 30`) to [`NEVER_READY`] and waits until
/// the Deployment is back at [`GOOD`] and the Cache says why, within the
/// timeout plus 10 s. Returns the Cache then.
async fn fail_an_upgrade(client: &Client, ns: &str, name: &str) -> anyhow::Result<DynamicObject> {
    let api = caches(client, ns);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    // From before the request: the API server may have taken the change
    // (and the deadline started) well before its answer reaches a busy
    // test.
    let changed = Instant::now();
    patch_spec(client, ns, name, json!({"image": NEVER_READY})).await?;
    let within = Duration::from_secs(TIMEOUT_SECONDS + 10);
    let cache = wait_for(within, || async {
        let c = api.get(name).await?;
        let d = deployments.get(name).await?;
        let rolled_back = at_generation(&c)
            && status_text(&c, "phase") == Some("Degraded")
            && template_image(&d).as_deref() == Some(GOOD);
        if rolled_back {
            Ok(Some(c))
        } else {
            bail!(
                "Cache status {:?}; Deployment image {:?}, conditions {:?}",
                at(&c, "/status"),
                template_image(&d),
                d.status.and_then(|s| s.conditions)
            )
        }
    })
    .await
    .with_context(|| format!("Cache {name} was not rolled back within {within:?}"))?;
    let elapsed = changed.elapsed();
    eprintln!(
        "Cache {ns}/{name}: rolled back {:.1} s after the change (timeoutSeconds {TIMEOUT_SECONDS})",
        elapsed.as_secs_f64()
    );
    ensure!(
        elapsed >= Duration::from_secs(TIMEOUT_SECONDS),
        "rolled back after {elapsed:?}, before the Deployment's deadline: not Kubernetes' verdict"
    );
    Ok(cache)
}

async fn a_good_upgrade_stays_ready_and_moves_the_last_good_image(
    env: Arc<TestEnv>,
    lang: Lang,
) -> anyhow::Result<()> {
    let (client, ns, _host) = setup(&env, "upgrade", lang).await?;
    create_ready(&client, &ns, "up", json!({"replicas": 2})).await?;
    let api = caches(&client, &ns);
    let version = api
        .get("up")
        .await?
        .resource_version()
        .context("no resourceVersion")?;
    patch_spec(&client, &ns, "up", json!({"image": NEWER})).await?;
    let states = states_until(&api, "up", &version, LONG, |c| {
        at_generation(c) && status_text(c, "lastGoodImage") == Some(NEWER)
    })
    .await?;

    // Upgrading=True, then Upgrading=False reason Upgraded; Ready throughout.
    let mut upgrading: Vec<ConditionState> = states
        .iter()
        .filter_map(|c| condition(c, "Upgrading"))
        .collect();
    upgrading.dedup();
    let rolling = (
        "True".to_owned(),
        "RollingOut".to_owned(),
        format!("{GOOD} -> {NEWER}"),
    );
    let upgraded = (
        "False".to_owned(),
        "Upgraded".to_owned(),
        format!("{GOOD} -> {NEWER}"),
    );
    ensure!(
        upgrading == [rolling, upgraded],
        "Upgrading went through {upgrading:?}"
    );
    let phases: Vec<_> = states
        .iter()
        .filter(|c| at_generation(c))
        .map(|c| status_text(c, "phase"))
        .collect();
    ensure!(
        phases.iter().all(|p| *p == Some("Ready")),
        "the phase left Ready while the old pods served: {phases:?}"
    );
    let last = states.last().context("no state")?;
    ensure!(
        condition(last, "Upgraded").map(|c| (c.0, c.1))
            == Some(("True".to_owned(), "Upgraded".to_owned())),
        "{:?}",
        at(last, "/status")
    );
    ensure!(
        at(last, "/status/failedImage").is_none(),
        "{:?}",
        at(last, "/status")
    );
    let deployment: Deployment = Api::namespaced(client.clone(), &ns).get("up").await?;
    ensure!(
        template_image(&deployment).as_deref() == Some(NEWER),
        "the Deployment runs {:?}",
        template_image(&deployment)
    );
    support::wait_for_event(&client, &ns, "up", "Upgraded", LONG).await?;
    let events = events_with_reason(&client, &ns, "up", "Upgraded").await?;
    ensure!(
        matches!(events.as_slice(), [(kind, _, 1)] if kind == "Normal"),
        "one Normal Upgraded Event is wanted, got {events:?}"
    );
    Ok(())
}

async fn a_failed_upgrade_is_rolled_back_to_the_last_good_image(
    env: Arc<TestEnv>,
    lang: Lang,
) -> anyhow::Result<()> {
    let (client, ns, _host) = setup(&env, "rollback", lang).await?;
    create_ready(
        &client,
        &ns,
        "down",
        json!({"upgrade": {"timeoutSeconds": TIMEOUT_SECONDS}}),
    )
    .await?;
    let cache = fail_an_upgrade(&client, &ns, "down").await?;
    ensure!(
        at(&cache, "/spec/image") == Some(&json!(NEVER_READY)),
        "spec.image is the user's: {:?}",
        at(&cache, "/spec")
    );
    ensure!(
        status_text(&cache, "lastGoodImage") == Some(GOOD)
            && status_text(&cache, "failedImage") == Some(NEVER_READY),
        "{:?}",
        at(&cache, "/status")
    );
    for type_ in ["Upgrading", "Upgraded"] {
        let (status, reason, message) = condition(&cache, type_)
            .with_context(|| format!("no {type_} in {:?}", at(&cache, "/status")))?;
        ensure!(
            status == "False" && reason == "RolledBack" && message.contains(NEVER_READY),
            "{type_}: {status} {reason} {message:?}"
        );
    }
    let note = support::wait_for_event(&client, &ns, "down", "UpgradeRolledBack", LONG).await?;
    ensure!(note.contains(NEVER_READY), "the Event says {note:?}");
    let events = events_with_reason(&client, &ns, "down", "UpgradeRolledBack").await?;
    ensure!(
        matches!(events.as_slice(), [(kind, _, 1)] if kind == "Warning"),
        "one Warning UpgradeRolledBack Event is wanted, got {events:?}"
    );
    // The rollback completes: the old image on every replica, Ready, while
    // the Cache stays Degraded.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    wait_for(LONG, || async {
        let d = deployments.get("down").await?;
        let status = d.status.clone().unwrap_or_default();
        Ok((template_image(&d).as_deref() == Some(GOOD)
            && status.replicas == Some(1)
            && status.updated_replicas == Some(1)
            && status.ready_replicas == Some(1))
        .then_some(()))
    })
    .await
    .context("the rollback did not complete")?;
    let cache = caches(&client, &ns).get("down").await?;
    ensure!(
        status_text(&cache, "phase") == Some("Degraded"),
        "{:?}",
        at(&cache, "/status")
    );
    Ok(())
}

async fn after_a_rollback_only_a_new_image_starts_a_new_upgrade(
    env: Arc<TestEnv>,
    lang: Lang,
) -> anyhow::Result<()> {
    let (client, ns, _host) = setup(&env, "again", lang).await?;
    create_ready(
        &client,
        &ns,
        "again",
        json!({"upgrade": {"timeoutSeconds": TIMEOUT_SECONDS}}),
    )
    .await?;
    fail_an_upgrade(&client, &ns, "again").await?;

    // The image that failed is not tried again while spec.image names it.
    let api = caches(&client, &ns);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let window = Instant::now() + Duration::from_secs(5);
    while Instant::now() < window {
        let d = deployments.get("again").await?;
        let c = api.get("again").await?;
        ensure!(
            template_image(&d).as_deref() == Some(GOOD)
                && status_text(&c, "phase") == Some("Degraded"),
            "the failed image was tried again: Deployment image {:?}, Cache status {:?}",
            template_image(&d),
            at(&c, "/status")
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    patch_spec(&client, &ns, "again", json!({"image": NEWER})).await?;
    let cache = wait_for(LONG, || async {
        let c = api.get("again").await?;
        let done = at_generation(&c)
            && status_text(&c, "lastGoodImage") == Some(NEWER)
            && status_text(&c, "phase") == Some("Ready");
        if done {
            Ok(Some(c))
        } else {
            bail!("status {:?}", at(&c, "/status"))
        }
    })
    .await
    .context("the new image was not upgraded to")?;
    ensure!(
        at(&cache, "/status/failedImage").is_none(),
        "{:?}",
        at(&cache, "/status")
    );
    ensure!(
        condition(&cache, "Upgraded").map(|c| (c.0, c.1, c.2))
            == Some((
                "True".to_owned(),
                "Upgraded".to_owned(),
                format!("{GOOD} -> {NEWER}")
            )),
        "{:?}",
        at(&cache, "/status")
    );
    let d = deployments.get("again").await?;
    ensure!(
        template_image(&d).as_deref() == Some(NEWER),
        "the Deployment runs {:?}",
        template_image(&d)
    );
    Ok(())
}

async fn a_paused_cache_does_not_upgrade_until_it_is_unpaused(
    env: Arc<TestEnv>,
    lang: Lang,
) -> anyhow::Result<()> {
    let (client, ns, _host) = setup(&env, "paused-upgrade", lang).await?;
    create_ready(&client, &ns, "p", json!({})).await?;
    patch_spec(&client, &ns, "p", json!({"paused": true})).await?;
    wait_phase(&client, &ns, "p", "Paused").await?;
    patch_spec(&client, &ns, "p", json!({"image": NEWER})).await?;
    let paused = wait_phase(&client, &ns, "p", "Paused").await?;
    ensure!(
        paused.metadata.generation == Some(3),
        "generation {:?}",
        paused.metadata.generation
    );

    let api = caches(&client, &ns);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let window = Instant::now() + Duration::from_secs(5);
    while Instant::now() < window {
        let d = deployments.get("p").await?;
        let c = api.get("p").await?;
        ensure!(
            template_image(&d).as_deref() == Some(GOOD)
                && status_text(&c, "lastGoodImage") == Some(GOOD)
                && condition(&c, "Upgrading").is_none(),
            "a paused Cache upgraded: Deployment image {:?}, Cache status {:?}",
            template_image(&d),
            at(&c, "/status")
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    patch_spec(&client, &ns, "p", json!({"paused": false})).await?;
    let cache = wait_for(LONG, || async {
        let c = api.get("p").await?;
        let done = at_generation(&c)
            && status_text(&c, "lastGoodImage") == Some(NEWER)
            && status_text(&c, "phase") == Some("Ready");
        if done {
            Ok(Some(c))
        } else {
            bail!("status {:?}", at(&c, "/status"))
        }
    })
    .await
    .context("unpausing did not upgrade")?;
    ensure!(
        condition(&cache, "Upgrading").map(|c| c.1) == Some("Upgraded".to_owned()),
        "{:?}",
        at(&cache, "/status")
    );
    let d = deployments.get("p").await?;
    ensure!(
        template_image(&d).as_deref() == Some(NEWER),
        "the Deployment runs {:?}",
        template_image(&d)
    );
    Ok(())
}

/// The tests of this module.
pub fn tests() -> Vec<Test> {
    let mut tests = Vec::new();
    for lang in Lang::ALL {
        tests.extend(per_language![lang;
            a_good_upgrade_stays_ready_and_moves_the_last_good_image,
            a_failed_upgrade_is_rolled_back_to_the_last_good_image,
            after_a_rollback_only_a_new_image_starts_a_new_upgrade,
            a_paused_cache_does_not_upgrade_until_it_is_unpaused,
        ]);
    }
    tests
        .into_iter()
        .map(|test| test.with_timeout(CASE_TIMEOUT))
        .collect()
}
