//! Keeping the shard label of a guest's parents (see [`super::shards`]),
//! each while this host may write for it: the holder of shard 0
//! ([`keep_labelled`]) watches only the parents without a label of the
//! current count (new ones, ones whose label a user removed, ones a larger
//! count left), and each shard's scope moves the parents it sees labelled
//! with it but hashed elsewhere (a user's edit, a label of another count)
//! through a [`Relabeller`]. One write for a new parent, none once every
//! parent carries its shard, and the labeller does not see the parents'
//! other changes. A parent whose shard changed has its children relabelled
//! first, then itself: its new scope then finds the children it already
//! has.

use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;

use super::apply::api_for;
use super::discovery::ResolvedKinds;
use super::shards::{SHARD_LABEL, Shard};
use super::watched::{Watched, scoped_api};
use crate::leader::Leadership;
use crate::validate::GUEST_LABEL;

/// Moves parents of a guest with `count` shards, with their children, to
/// the shard their hash names.
#[derive(Clone)]
pub(super) struct Relabeller {
    /// Fenced by the unit whose parents it moves, named [`LABELLER`].
    pub(super) client: Client,
    pub(super) kinds: ResolvedKinds,
    pub(super) guest: String,
    pub(super) count: u16,
}

/// What [`keep_labelled`] labels: the parents of one namespace scope that
/// carry no shard of the count.
pub(super) struct Labelling {
    pub(super) relabeller: Relabeller,
    pub(super) namespace: Option<String>,
    pub(super) left_out: Option<String>,
    /// Shard 0's.
    pub(super) leadership: Leadership,
}

/// Keeps every parent of the scope labelled with a shard while this host
/// may write, until `shutdown`.
pub(super) async fn keep_labelled(
    labelling: Labelling,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let mut leading = labelling.leadership.subscribe();
    loop {
        tokio::select! {
            led = leading.wait_for(|leads| *leads) => if led.is_err() { return },
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
        tokio::select! {
            () = labelling.label() => {}
            _ = leading.wait_for(|leads| !*leads) => {}
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
    }
}

impl Labelling {
    /// Watches the metadata of the parents that carry no shard of the count
    /// (no store: a watch event is all a label needs) and labels each one.
    /// A labelled parent leaves the selection.
    async fn label(&self) {
        let relabeller = &self.relabeller;
        let watched = Watched {
            client: &relabeller.client,
            kinds: &relabeller.kinds,
            namespace: self.namespace.as_deref(),
            left_out: self.left_out.as_deref(),
            shard: None,
        };
        let api: Api<PartialObjectMeta<DynamicObject>> = scoped_api(
            &relabeller.client,
            &relabeller.kinds.primary,
            self.namespace.as_deref(),
        );
        let unassigned = Shard::unassigned(relabeller.count);
        let mut parents = watcher(
            api,
            watched.config_selecting(&relabeller.kinds.primary, Some(&unassigned)),
        )
        .backoff(crate::retry::watch_backoff())
        .applied_objects()
        .boxed();
        loop {
            match parents.try_next().await {
                Ok(Some(parent)) => {
                    let Some(uid) = parent.uid() else { continue };
                    relabeller
                        .relabel(
                            parent.namespace().as_deref(),
                            &parent.name_any(),
                            &uid,
                            parent.labels().get(SHARD_LABEL).map(String::as_str),
                        )
                        .await;
                }
                Ok(None) => return,
                Err(e) => {
                    tracing::warn!(guest = %relabeller.guest, "watch of the parents to label failed, retrying: {e}")
                }
            }
        }
    }
}

impl Relabeller {
    /// Labels the parent `namespace/name` (UID `uid`, labelled `have`) with
    /// its shard, its children first when it had another; `false` when
    /// that failed (a parent gone or replaced needs nothing).
    pub(super) async fn relabel(
        &self,
        namespace: Option<&str>,
        name: &str,
        uid: &str,
        have: Option<&str>,
    ) -> bool {
        let want = Shard::of(namespace, name, self.count).to_string();
        if have == Some(want.as_str()) {
            return true;
        }
        let api = scoped_api(&self.client, &self.kinds.primary, namespace);
        for attempt in 1..=3 {
            let labelled = async {
                // Labelled for another shard: its children move first.
                if have.is_some() {
                    self.relabel_children(namespace, uid, &want).await?;
                }
                label(&api, name, uid, &want).await
            };
            match labelled.await {
                Ok(()) => {
                    tracing::debug!(guest = %self.guest, parent = %name, shard = %want, "labelled its shard");
                    return true;
                }
                Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => return true,
                Err(e) if attempt == 3 => {
                    tracing::warn!(guest = %self.guest, parent = %name, "could not label the parent's shard: {e}");
                }
                Err(_) => tokio::time::sleep(std::time::Duration::from_secs(1)).await,
            }
        }
        false
    }

    /// Labels the children of the parent `uid` with shard `want`.
    async fn relabel_children(
        &self,
        namespace: Option<&str>,
        uid: &str,
        want: &str,
    ) -> kube::Result<()> {
        let selector = format!("{GUEST_LABEL}={},{SHARD_LABEL}!={want}", self.guest);
        for kind in &self.kinds.children {
            let api: Api<DynamicObject> = scoped_api(&self.client, kind, namespace);
            let listed = api
                .list_metadata(&ListParams::default().labels(&selector))
                .await?;
            for child in listed.items.iter().filter(|child| {
                child
                    .owner_references()
                    .iter()
                    .any(|o| o.controller == Some(true) && o.uid == uid)
            }) {
                let Some(child_uid) = child.uid() else {
                    continue;
                };
                let child_api = api_for(&self.client, &kind.resource, child.namespace().as_deref());
                match label(&child_api, &child.name_any(), &child_uid, want).await {
                    Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
                    other => other?,
                }
            }
        }
        Ok(())
    }
}

/// Sets the shard label of the object `name` whose UID is `uid` (a merge
/// patch that fails if the name now holds another object).
async fn label(api: &Api<DynamicObject>, name: &str, uid: &str, shard: &str) -> kube::Result<()> {
    let patch = json!({"metadata": {"uid": uid, "labels": {SHARD_LABEL: shard}}});
    api.patch_metadata(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(drop)
}
