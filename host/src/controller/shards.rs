//! A guest's parents split into shards (the guest-list entry's `shards`).
//!
//! A parent's shard is a stable hash of its namespace and name modulo the
//! shard count. The host keeps it in the parent's [`SHARD_LABEL`] and
//! stamps it on every child it applies for that parent, so each shard's
//! scope watches, with a label selector, only its own parents and children:
//! its caches hold its share, not the whole guest.
//!
//! The label is kept in two places, each while this host may write for
//! it: the holder of shard 0 ([`keep_labelled`]) watches only the parents
//! without a label of the current count (new ones, ones whose label a user
//! removed, ones a larger count left), and each shard's scope moves the
//! parents it sees labelled with it but hashed elsewhere (a user's edit, a
//! label of another count). One write for a new parent, none once every
//! parent carries its shard, and the labeller does not see the parents'
//! other changes. A parent whose shard changed has its children relabelled
//! first, then itself: its new scope then finds the children it already
//! has. A scope reconciles only the parents whose hash is its shard.

use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;
pub use wasmop_contract::names::SHARD_LABEL;

use super::apply::api_for;
use super::triggers::Watched;
use super::{ResolvedKinds, scoped_api};
use crate::leader::Leadership;
use crate::validate::GUEST_LABEL;

/// The duty the labeller's requests name in their user agent
/// (`… guest/<guest> shard-labeller`).
pub const LABELLER: &str = "shard-labeller";

/// The most shards a guest may have.
pub const MAX_SHARDS: u16 = 64;

/// One shard of a guest: `index` of `count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// This shard, `0..count`.
    pub index: u16,
    /// The guest's shard count (at least 2: a guest of one shard is not
    /// sharded).
    pub count: u16,
}

impl Shard {
    /// The shards of a guest with `count` of them, or one unsharded scope
    /// (`None`) when `count` is 1.
    pub fn all(count: u16) -> Vec<Option<Shard>> {
        if count <= 1 {
            return vec![None];
        }
        (0..count)
            .map(|index| Some(Shard { index, count }))
            .collect()
    }

    /// The shard of the parent `namespace/name` among `count`: FNV-1a
    /// (64 bit) of `namespace/name`, modulo `count`.
    pub fn of(namespace: Option<&str>, name: &str, count: u16) -> u16 {
        const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
        const PRIME: u64 = 0x0000_0100_0000_01b3;
        let key = format!("{}/{name}", namespace.unwrap_or_default());
        let hash = key
            .bytes()
            .fold(OFFSET, |h, b| (h ^ u64::from(b)).wrapping_mul(PRIME));
        u16::try_from(hash % u64::from(count.max(1))).expect("below a u16 count")
    }

    /// Whether the parent `namespace/name` is this shard's.
    pub fn owns(&self, namespace: Option<&str>, name: &str) -> bool {
        Self::of(namespace, name, self.count) == self.index
    }

    /// The label selector of this shard's objects.
    pub fn selector(&self) -> String {
        format!("{SHARD_LABEL}={}", self.index)
    }

    /// The label selector of the objects labelled with no shard of
    /// `count`: without the label, or with one outside `0..count`.
    pub fn unassigned(count: u16) -> String {
        let shards: Vec<String> = (0..count).map(|k| k.to_string()).collect();
        format!("{SHARD_LABEL} notin ({})", shards.join(","))
    }
}

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
        let mut parents = watcher(api, watched.config_selecting(Some(&unassigned)))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parents_shard_is_stable_and_within_the_count() {
        for count in [2, 3, 5, MAX_SHARDS] {
            for i in 0..200 {
                let name = format!("cache-{i}");
                let shard = Shard::of(Some("team-a"), &name, count);
                assert!(shard < count);
                assert_eq!(shard, Shard::of(Some("team-a"), &name, count));
            }
        }
        // FNV-1a of "/a" (64 bit), a fixed point of the contract.
        assert_eq!(
            Shard::of(None, "a", 7),
            (0x07d6_6707_b49c_d92d_u64 % 7) as u16
        );
    }

    #[test]
    fn shards_spread_parents_about_evenly() {
        let count = 3;
        let mut per = [0usize; 3];
        for i in 0..3000 {
            per[usize::from(Shard::of(Some("ns"), &format!("cache-{i}"), count))] += 1;
        }
        assert!(per.iter().all(|n| (800..1200).contains(n)), "{per:?}");
    }

    #[test]
    fn one_shard_is_one_unsharded_scope() {
        assert_eq!(Shard::all(1), vec![None]);
        let three = Shard::all(3);
        assert_eq!(three.len(), 3);
        assert!(three.iter().enumerate().all(|(i, s)| {
            s.is_some_and(|s| {
                usize::from(s.index) == i
                    && s.count == 3
                    && s.selector() == format!("wasmop.dev/shard={i}")
            })
        }));
    }

    #[test]
    fn the_unassigned_selector_names_every_shard_of_the_count() {
        assert_eq!(Shard::unassigned(3), "wasmop.dev/shard notin (0,1,2)");
        assert!(Shard::unassigned(MAX_SHARDS).ends_with(",62,63)"));
    }

    #[test]
    fn each_parent_is_owned_by_exactly_one_shard() {
        let shards = Shard::all(4);
        for i in 0..100 {
            let name = format!("p{i}");
            let owners = shards
                .iter()
                .flatten()
                .filter(|s| s.owns(Some("ns"), &name))
                .count();
            assert_eq!(owners, 1);
        }
    }
}
