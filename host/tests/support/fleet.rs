//! A fleet of Caches under the production setup, and the oracle the fault
//! suite and the soak bench end with: every Cache Ready at its generation,
//! exactly the desired children (none duplicated, orphaned or missing), no
//! Cache stuck Terminating, the host alive, and no write by the host once
//! converged.

use super::guests::{Entry, GuestList};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context as _, bail, ensure};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};
use wasmop_testenv::TestEnv;

use super::{
    HostProcess, LEASE, Write, at, caches, dyn_api, guest_module, install_cache_crd,
    put_guest_list, put_module, timed_successful_writes_by, wait_for,
};

/// How long a fleet may take to converge.
pub const CONVERGE: Duration = Duration::from_secs(300);
const LIST: &str = "wasmop-guests";
const GUEST_LABEL: &str = "wasmop.dev/guest=cache-operator";

/// A namespace of Caches under the production setup: the guest list
/// ConfigMap with the cache-operator's module, a least-privilege identity
/// made by `wasmop rbac`, and a host with leader election.
pub struct Fleet {
    pub env: Arc<TestEnv>,
    /// An admin client.
    pub client: Client,
    /// The fleet's namespace (it also holds the guest list and the Lease).
    pub ns: String,
    /// The host's user, as the audit log names it.
    pub user: String,
    kubeconfig: PathBuf,
    host: Option<HostProcess>,
    starts: usize,
    size: usize,
}

/// What the oracle expects.
pub struct Expect {
    /// The Caches that exist.
    pub names: BTreeSet<String>,
    /// Whether v2 made their children (a PodDisruptionBudget each).
    pub v2: bool,
}

impl Expect {
    /// Caches `cache-0` to `cache-<n-1>`, v1.
    pub fn first(n: usize) -> Self {
        Self {
            names: (0..n).map(name).collect(),
            v2: false,
        }
    }
}

/// The name of the `i`-th Cache.
pub fn name(i: usize) -> String {
    format!("cache-{i}")
}

impl Fleet {
    /// The setup in a new namespace `<prefix>-<n>`, for `size` Caches; no
    /// host runs yet.
    pub async fn new(env: &Arc<TestEnv>, prefix: &str, size: usize) -> anyhow::Result<Self> {
        let client = env.client();
        install_cache_crd(&client).await?;
        let ns = env.create_namespace(prefix).await?;
        let case = Self::in_namespace(env, ns, size).await?;
        case.use_version("cache-operator").await?;
        put_guest_list(
            &client,
            &case.ns,
            LIST,
            &GuestList::of([Entry::cache_operator(&case.ns).with("concurrency", 8)]).yaml(),
        )
        .await?;
        Ok(case)
    }

    async fn in_namespace(env: &Arc<TestEnv>, ns: String, size: usize) -> anyhow::Result<Self> {
        let (user, kubeconfig) =
            super::least_privilege(env, &ns, &ns, &["cache-operator", "cache-operator-v2"]).await?;
        Ok(Self {
            env: env.clone(),
            client: env.client(),
            ns,
            user,
            kubeconfig,
            host: None,
            starts: 0,
            size,
        })
    }

    /// Puts the built guest `flavor` into the module ConfigMap.
    pub async fn use_version(&self, flavor: &str) -> anyhow::Result<()> {
        let module = std::fs::read(guest_module(flavor)?)?;
        put_module(
            &self.client,
            &self.ns,
            "cache-module",
            "module.wasm",
            &module,
        )
        .await
    }

    /// Starts a host (a new process, so a new leader-election identity) and
    /// waits until it leads.
    pub async fn start_host(&mut self) -> anyhow::Result<()> {
        self.starts += 1;
        let list = format!("{}/{LIST}", self.ns);
        let mut args = vec!["--guests-configmap", list.as_str()];
        args.extend_from_slice(LEASE);
        let mut host = HostProcess::start(
            &self.env,
            &self.kubeconfig,
            &format!("{}-{}", self.ns, self.starts),
            &args,
        )?;
        host.wait_for_log("became the leader", Duration::from_secs(60))
            .await?;
        self.host = Some(host);
        Ok(())
    }

    /// `kill -9` of the host.
    pub fn kill_host(&mut self) {
        if let Some(mut host) = self.host.take() {
            host.stop();
        }
    }

    /// The running host.
    pub fn host(&mut self) -> anyhow::Result<&mut HostProcess> {
        self.host.as_mut().context("no host running")
    }

    /// Creates the fleet's Caches, 16 at a time.
    pub async fn create_caches(&self) -> anyhow::Result<()> {
        self.create_range(0..self.size).await
    }

    /// Creates Caches `range`.
    pub async fn create_range(&self, range: std::ops::Range<usize>) -> anyhow::Result<()> {
        let api = caches(&self.client, &self.ns);
        futures::stream::iter(range)
            .map(|i| {
                let api = api.clone();
                async move {
                    let cache = serde_json::from_value(json!({
                        "apiVersion": "apps.example.com/v1alpha1", "kind": "Cache",
                        "metadata": {"name": name(i)},
                        "spec": {"image": "redis:7.2", "replicas": 1, "config": {"round": "0"}},
                    }))?;
                    api.create(&PostParams::default(), &cache).await?;
                    anyhow::Ok(())
                }
            })
            .buffer_unordered(16)
            .try_collect::<()>()
            .await
    }

    /// How many Caches are Ready at their generation.
    pub async fn ready(&self) -> anyhow::Result<usize> {
        let list = caches(&self.client, &self.ns)
            .list(&ListParams::default())
            .await?;
        Ok(list.items.iter().filter(|c| is_ready(c)).count())
    }

    /// Waits until convergence is under way: some Caches Ready, not all.
    pub async fn wait_converging(&self) -> anyhow::Result<()> {
        wait_for(CONVERGE, || async {
            let ready = self.ready().await?;
            let size = self.size;
            ensure!(ready < size, "all {size} converged before the fault");
            Ok((ready >= 10).then_some(()))
        })
        .await
        .context("convergence never got under way")
    }

    /// The oracle: converged as `expect` says, the host alive, and then no
    /// write by the host for 5 s. Returns how long convergence took from
    /// `since`.
    pub async fn converged(&mut self, expect: &Expect, since: Instant) -> anyhow::Result<Duration> {
        wait_for(CONVERGE, || async { self.check(expect).await.map(Some) })
            .await
            .map_err(|e| self.with_host_log(e))
            .context("the oracle never held")?;
        let took = since.elapsed();
        ensure!(self.host()?.is_running(), "the host died");
        self.no_writes_after_convergence().await?;
        ensure!(self.host()?.is_running(), "the host died");
        Ok(took)
    }

    /// `error` with the host's log lines about the first Cache it names.
    fn with_host_log(&mut self, error: anyhow::Error) -> anyhow::Error {
        let text = format!("{error:#}");
        let Some(cache) = text
            .split('"')
            .find(|w| w.starts_with("cache-"))
            .map(str::to_owned)
        else {
            return error;
        };
        let needle = format!("/{cache}");
        let lines: Vec<String> = self
            .host
            .as_ref()
            .map(|h| h.log())
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(&needle))
            .map(str::to_owned)
            .collect();
        let tail = lines[lines.len().saturating_sub(40)..].join("\n");
        error.context(format!("host log lines about {cache} (last 40):\n{tail}"))
    }

    /// The oracle's state checks, once.
    pub async fn check(&self, expect: &Expect) -> anyhow::Result<()> {
        let list = caches(&self.client, &self.ns)
            .list(&ListParams::default())
            .await?;
        let names: BTreeSet<String> = list.items.iter().map(ResourceExt::name_any).collect();
        if names != expect.names {
            let extra: Vec<_> = names.difference(&expect.names).take(5).collect();
            let missing: Vec<_> = expect.names.difference(&names).take(5).collect();
            bail!("Caches differ: unexpected {extra:?} (Terminating?), missing {missing:?}");
        }
        let not_ready: Vec<_> = list
            .items
            .iter()
            .filter(|c| !is_ready(c))
            .map(ResourceExt::name_any)
            .collect();
        if let Some(first) = list.items.iter().find(|c| !is_ready(c)) {
            // Whose turn it is: the Deployment's own progress tells a host
            // that missed an event from a rollout that has not happened.
            let deployment = Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(
                self.client.clone(),
                &self.ns,
            )
            .get_opt(&first.name_any())
            .await?
            .map(|d| {
                json!({
                    "generation": d.metadata.generation,
                    "resourceVersion": d.metadata.resource_version,
                    "status": d.status,
                })
            });
            bail!(
                "{} Caches not Ready at their generation, e.g. {:?}; {} is at generation {:?} with status {}; its Deployment: {}",
                not_ready.len(),
                &not_ready[..not_ready.len().min(5)],
                first.name_any(),
                first.metadata.generation,
                at(first, "/status").cloned().unwrap_or_default(),
                deployment.unwrap_or_default()
            );
        }
        let uids: BTreeMap<String, String> = list
            .items
            .iter()
            .map(|c| (c.uid().unwrap_or_default(), c.name_any()))
            .collect();
        let mut kinds = vec![
            ("", "v1", "ConfigMap", "configmaps"),
            ("apps", "v1", "Deployment", "deployments"),
            ("", "v1", "Service", "services"),
        ];
        if expect.v2 {
            kinds.push((
                "policy",
                "v1",
                "PodDisruptionBudget",
                "poddisruptionbudgets",
            ));
        }
        let mut found = BTreeSet::new();
        for (group, version, kind, plural) in kinds {
            let api = dyn_api(&self.client, group, version, kind, plural, &self.ns);
            for child in api
                .list(&ListParams::default().labels(GUEST_LABEL))
                .await?
                .items
            {
                let owner = child
                    .owner_references()
                    .iter()
                    .find(|o| o.controller == Some(true))
                    .map(|o| o.uid.clone())
                    .unwrap_or_default();
                let Some(parent) = uids.get(&owner) else {
                    bail!("{kind} {} is orphaned (owner {owner:?})", child.name_any());
                };
                let expected_name = if kind == "ConfigMap" {
                    format!("{parent}-config")
                } else {
                    parent.clone()
                };
                ensure!(
                    child.name_any() == expected_name,
                    "{kind} {} is not a child Cache {parent} should have",
                    child.name_any()
                );
                if expect.v2 && kind == "Deployment" {
                    ensure!(
                        child
                            .labels()
                            .get("apps.example.com/version")
                            .map(String::as_str)
                            == Some("v2"),
                        "Deployment {} is not v2's",
                        child.name_any()
                    );
                }
                ensure!(
                    found.insert((kind, child.name_any())),
                    "{kind} {} twice",
                    child.name_any()
                );
            }
        }
        let per_cache = if expect.v2 { 4 } else { 3 };
        ensure!(
            found.len() == per_cache * expect.names.len(),
            "{} children, want {}",
            found.len(),
            per_cache * expect.names.len()
        );
        Ok(())
    }

    /// Once converged the host writes nothing: its successful writes (the
    /// Lease renewals aside) pause for 5 s. Writes still in flight when the
    /// oracle first held (the last status updates) get 10 s to land first.
    /// Judged by the times the API server received the writes, so a slow
    /// read of a large audit log cannot stretch or shrink either window.
    pub async fn no_writes_after_convergence(&self) -> anyhow::Result<()> {
        const QUIET: Duration = Duration::from_secs(5);
        const GRACE: Duration = Duration::from_secs(10);
        let held = Timestamp::now();
        let grace_ends = held + GRACE;
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let now = Timestamp::now();
            let writes: Vec<_> = self
                .timed_writes()?
                .into_iter()
                .filter(|(at, _)| *at >= held)
                .collect();
            let late: Vec<_> = writes
                .iter()
                .filter(|(at, _)| *at > grace_ends)
                .map(|(_, write)| write)
                .collect();
            if !late.is_empty() {
                bail!(
                    "the host kept writing after convergence ({} writes after the first {} s), e.g. {:?}",
                    late.len(),
                    GRACE.as_secs(),
                    &late[..late.len().min(10)]
                );
            }
            // A second more: the log shows a write once it completed, so
            // one received just before `now` may not be there yet.
            let last = writes.iter().map(|(at, _)| *at).max().unwrap_or(held);
            if now.duration_since(last)
                >= SignedDuration::try_from(QUIET)? + SignedDuration::from_secs(1)
            {
                return Ok(());
            }
        }
    }

    /// The host's successful writes but its Lease renewals.
    pub fn writes(&self) -> anyhow::Result<Vec<Write>> {
        Ok(self.timed_writes()?.into_iter().map(|(_, w)| w).collect())
    }

    /// [`Fleet::writes`], each with the time the API server received it.
    pub fn timed_writes(&self) -> anyhow::Result<Vec<(Timestamp, Write)>> {
        Ok(timed_successful_writes_by(&self.env, &self.user)?
            .into_iter()
            .filter(|(_, (_, resource, _, _))| resource != "leases")
            .collect())
    }

    /// How long after `from` the host's first write (but a Lease renewal
    /// or an Event) reached the API server.
    pub async fn first_write_after(&self, from: SystemTime) -> anyhow::Result<Duration> {
        let from_ts = Timestamp::try_from(from)?;
        wait_for(Duration::from_secs(120), || async {
            let first = self
                .timed_writes()?
                .into_iter()
                .filter(|(_, (_, resource, _, _))| resource != "events")
                .map(|(at, _)| at)
                .filter(|at| *at >= from_ts)
                .min();
            Ok(first.map(|t| Duration::try_from(t.duration_since(from_ts)).unwrap_or_default()))
        })
        .await
        .context("the host never wrote after the API server came back")
    }

    /// Ends the case: stops the host, lets go of the Caches' finalizers and
    /// deletes the namespace (its Pods go with it).
    pub async fn finish(mut self) -> anyhow::Result<()> {
        self.kill_host();
        let api = caches(&self.client, &self.ns);
        for cache in api.list(&ListParams::default()).await?.items {
            let patch = json!({"metadata": {"finalizers": null, "resourceVersion": null}});
            api.patch(
                &cache.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .ok();
        }
        Api::<k8s_openapi::api::core::v1::Namespace>::all(self.client.clone())
            .delete(&self.ns, &DeleteParams::default())
            .await?;
        Ok(())
    }
}

/// Ready at its generation, not being deleted.
pub fn is_ready(cache: &DynamicObject) -> bool {
    cache.metadata.deletion_timestamp.is_none()
        && at(cache, "/status/phase") == Some(&json!("Ready"))
        && at(cache, "/status/observedGeneration").and_then(Value::as_i64)
            == cache.metadata.generation
}
