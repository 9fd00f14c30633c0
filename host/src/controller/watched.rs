//! How a scope watches its kinds: the watch configuration of one namespace
//! scope and shard, and the objects as they enter its caches.

use kube::Client;
use kube::api::{Api, DynamicObject};
use kube::runtime::watcher;

use super::discovery::{ResolvedKind, ResolvedKinds};
use super::shards::Shard;

/// Objects that arrive in a LIST response carry no apiVersion and kind:
/// filled in once, as they enter the cache, so guests and the drift check
/// always see complete objects. The field sets of managedFields go too
/// (often the largest part of an object, and nothing here reads them); the
/// entries stay, so the host can tell a child it created but never applied
/// (`apply::write_child`).
pub(super) fn typed_events(
    ar: kube::core::ApiResource,
) -> impl FnMut(watcher::Event<DynamicObject>) -> watcher::Event<DynamicObject> {
    move |event| {
        event.modify(|object| {
            object.types.get_or_insert_with(|| kube::core::TypeMeta {
                api_version: ar.api_version.clone(),
                kind: ar.kind.clone(),
            });
            for entry in object.metadata.managed_fields.iter_mut().flatten() {
                entry.fields_v1 = None;
            }
        })
    }
}

/// `event` with `f` applied to its object, if it has one.
pub(super) fn map_object<A, B>(
    event: watcher::Event<A>,
    mut f: impl FnMut(A) -> B,
) -> watcher::Event<B> {
    match event {
        watcher::Event::Apply(o) => watcher::Event::Apply(f(o)),
        watcher::Event::Delete(o) => watcher::Event::Delete(f(o)),
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitApply(o) => watcher::Event::InitApply(f(o)),
        watcher::Event::InitDone => watcher::Event::InitDone,
    }
}

pub(super) fn scoped_api<K>(client: &Client, kind: &ResolvedKind, namespace: Option<&str>) -> Api<K>
where
    K: kube::Resource<
            DynamicType = kube::discovery::ApiResource,
            Scope = kube::core::DynamicResourceScope,
        >,
{
    match namespace {
        Some(ns) if kind.namespaced => Api::namespaced_with(client.clone(), ns, &kind.resource),
        _ => Api::all_with(client.clone(), &kind.resource),
    }
}

/// What a trigger watches: the guest's kinds in one namespace scope.
pub(super) struct Watched<'a> {
    pub(super) client: &'a Client,
    pub(super) kinds: &'a ResolvedKinds,
    /// The scope's namespace (`None`: all).
    pub(super) namespace: Option<&'a str>,
    /// The host's own namespace, when the scope is every namespace: its
    /// parents and children are left out of the watches.
    pub(super) left_out: Option<&'a str>,
    /// The scope's shard: only the parents and children labelled with it
    /// are watched.
    pub(super) shard: Option<Shard>,
}

impl Watched<'_> {
    /// How the scope's objects of `kind` (its parents or children) are
    /// watched: everywhere in the scope but the namespace
    /// [`Self::left_out`] names (the API server leaves it out of the list
    /// and the watch; a cluster-scoped kind has no namespace to leave out).
    pub(super) fn config(&self, kind: &ResolvedKind) -> watcher::Config {
        self.config_selecting(kind, None)
    }

    /// [`Self::config`], selecting also by the label selector `labels`.
    pub(super) fn config_selecting(
        &self,
        kind: &ResolvedKind,
        labels: Option<&str>,
    ) -> watcher::Config {
        let mut config = match self.left_out.filter(|_| kind.namespaced) {
            Some(ns) => watcher::Config::default().fields(&format!("metadata.namespace!={ns}")),
            None => watcher::Config::default(),
        };
        let selector: Vec<String> = labels
            .map(str::to_owned)
            .into_iter()
            .chain(self.shard.map(|s| s.selector()))
            .collect();
        if !selector.is_empty() {
            config = config.labels(&selector.join(","));
        }
        config
    }
}
