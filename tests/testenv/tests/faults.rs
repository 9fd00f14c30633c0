//! The fault controls do what they say to the real processes: a restarted
//! kube-apiserver or etcd serves the same data, a paused kube-apiserver
//! answers nothing until it is resumed, and after a compaction (which etcd
//! confirms) a watch from an older resourceVersion is `410 Gone`. The tests fault the control plane they
//! share, so they run one at a time.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, PostParams, WatchEvent, WatchParams};
use wasmop_testenv::{Component, TestEnv, harness};

fn main() -> ExitCode {
    harness::run_in_sequence(wasmop_testenv::tests![
        a_restarted_api_server_serves_what_was_written_before,
        a_restarted_etcd_keeps_its_data_and_the_api_server_recovers,
        a_paused_api_server_answers_nothing_until_it_is_resumed,
        after_a_compaction_old_resource_versions_are_gone,
    ])
}

async fn config_map(api: &Api<ConfigMap>, name: &str) -> Result<ConfigMap> {
    let map = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        data: Some([("k".to_owned(), name.to_owned())].into()),
        ..ConfigMap::default()
    };
    Ok(api.create(&PostParams::default(), &map).await?)
}

/// Retries `get` until it succeeds (a restarted component takes a moment).
async fn eventually_get(api: &Api<ConfigMap>, name: &str) -> Result<ConfigMap> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match api.get(name).await {
            Ok(map) => return Ok(map),
            Err(e) if Instant::now() > deadline => return Err(e).context("still failing"),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

async fn a_restarted_api_server_serves_what_was_written_before(env: Arc<TestEnv>) -> Result<()> {
    let ns = env.create_namespace("restart-apiserver").await?;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    config_map(&api, "before").await?;
    env.kill(Component::KubeApiserver)?;
    ensure!(
        api.get("before").await.is_err(),
        "a killed API server still answered"
    );
    env.restart(Component::KubeApiserver).await?;
    let map = eventually_get(&api, "before").await?;
    ensure!(map.data.unwrap_or_default()["k"] == "before");
    config_map(&api, "after").await?;
    Ok(())
}

async fn a_restarted_etcd_keeps_its_data_and_the_api_server_recovers(
    env: Arc<TestEnv>,
) -> Result<()> {
    let ns = env.create_namespace("restart-etcd").await?;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    config_map(&api, "before").await?;
    env.kill(Component::Etcd)?;
    // Without its storage the API server refuses writes.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let attempt =
            tokio::time::timeout(Duration::from_secs(5), config_map(&api, "during")).await;
        match attempt {
            Ok(Ok(_)) if Instant::now() < deadline => {
                // Accepted before the API server noticed; try another name.
                api.delete("during", &Default::default()).await.ok();
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Ok(Ok(_)) => bail!("the API server kept writing without etcd"),
            Ok(Err(_)) | Err(_) => break,
        }
    }
    env.restart(Component::Etcd).await?;
    env.wait_until_ready().await?;
    let map = eventually_get(&api, "before").await?;
    ensure!(map.data.unwrap_or_default()["k"] == "before");
    config_map(&api, "after").await?;
    Ok(())
}

async fn a_paused_api_server_answers_nothing_until_it_is_resumed(env: Arc<TestEnv>) -> Result<()> {
    let ns = env.create_namespace("pause-apiserver").await?;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    config_map(&api, "before").await?;
    env.pause(Component::KubeApiserver)?;
    let during = tokio::time::timeout(Duration::from_secs(2), api.get("before")).await;
    env.resume(Component::KubeApiserver)?;
    ensure!(during.is_err(), "a paused API server answered: {during:?}");
    eventually_get(&api, "before").await?;
    Ok(())
}

async fn after_a_compaction_old_resource_versions_are_gone(env: Arc<TestEnv>) -> Result<()> {
    let ns = env.create_namespace("compaction").await?;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &ns);
    let first = config_map(&api, "first").await?;
    let old = first.metadata.resource_version.context("resourceVersion")?;
    for i in 0..5 {
        config_map(&api, &format!("later-{i}")).await?;
    }
    let revision = env.compact_etcd().await?;
    ensure!(
        revision > old.parse::<i64>()?,
        "compacted at {revision}, not past {old}"
    );
    // A restarted API server's watch cache starts at the current revision:
    // a watch from before it is told to re-list.
    env.restart(Component::KubeApiserver).await?;
    let mut events = api
        .watch(&WatchParams::default().timeout(10), &old)
        .await?
        .boxed();
    match tokio::time::timeout(Duration::from_secs(15), events.next()).await {
        Ok(Some(Ok(WatchEvent::Error(status)))) if status.code == 410 => Ok(()),
        other => bail!("a watch from a compacted resourceVersion got {other:?}"),
    }
}
