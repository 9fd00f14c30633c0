//! The related objects a Metacontroller controller's customize hook
//! selects: per parent, rules the hook gives at each reconcile (a
//! resource, a namespace, names or a label selector), read from one watch
//! per resource in the scope (its namespace, or every one: as many parents
//! in as many namespaces share it), started at the first rule that names
//! the resource.
//!
//! Each watch runs with the guest's own client (its identity's grants
//! decide what it may read) and fills a store; a change of an object
//! queues every parent whose rules select it, as Metacontroller resyncs a
//! parent when a related object changes. A kind that grants power
//! (Secrets, RBAC, …) is related only if the guest list names it in the
//! guest's `privilegedKinds`, as a declared related kind; Secrets are
//! concealed unless the guest may see their values, and a request's related
//! objects are held to the guest's `maxRelatedObjects` and
//! `maxRelatedBytes`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersion, SelectorExt};
use kube::runtime::{WatchStreamExt, reflector, watcher};

use super::compact::ParentRef;
use super::index::{NotReady, wait_listed};
use super::related::{RelatedBounds, RelatedBudget, RelatedTooLarge};
use super::watched::typed_events;
use crate::metacontroller::sync::RelatedRule;
use crate::validate::description::{PrivilegedKinds, power_of, privileged_name};

/// Resources one scope of a guest watches for its customize hooks at
/// most.
pub const MAX_WATCHES: usize = 32;

/// One watch: a resource, by `apiVersion` and plural.
type WatchKey = (String, String);

/// Why the related objects cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A rule names a resource the API server does not serve, or more
    /// watches than a scope keeps.
    #[error("{0}")]
    Rule(String),
    /// A watch has not listed.
    #[error("{0}")]
    NotReady(#[from] NotReady),
    /// The objects pass the guest's bounds.
    #[error("{0}")]
    TooLarge(#[from] RelatedTooLarge),
}

struct Watch {
    resource: ApiResource,
    store: reflector::Store<DynamicObject>,
    listing: Arc<Mutex<Listing>>,
    task: tokio::task::AbortHandle,
}

/// Whether a watch has listed, and its last error (cleared when it lists
/// again).
#[derive(Debug, Default)]
struct Listing {
    listed: bool,
    error: Option<String>,
}

#[derive(Default)]
struct State {
    /// (apiVersion, resource) → the resource and whether it is namespaced.
    resolved: HashMap<(String, String), (ApiResource, bool)>,
    watches: HashMap<WatchKey, Watch>,
    /// Each parent's rules, as its last reconcile's customize hook gave
    /// them.
    selected: HashMap<ParentRef, Vec<RelatedRule>>,
}

/// The customize hooks' related objects of one scope.
pub struct Customized {
    client: Client,
    /// Where a change queues the parents it concerns.
    wake: tokio::sync::mpsc::UnboundedSender<ParentRef>,
    /// The scope's namespace (`None`: every namespace).
    scope: Option<String>,
    /// The host's own namespace, never watched.
    host_namespace: Option<String>,
    /// Related Secrets' values are concealed.
    conceal: bool,
    state: Arc<Mutex<State>>,
    /// Ticked when a watch lists or fails.
    changed: tokio::sync::watch::Sender<u64>,
}

impl Drop for Customized {
    fn drop(&mut self) {
        for watch in self.state.lock().expect("customized lock").watches.values() {
            watch.task.abort();
        }
    }
}

impl Customized {
    /// For a scope whose watches run with `client`, queueing on `wake`.
    pub fn new(
        client: Client,
        wake: tokio::sync::mpsc::UnboundedSender<ParentRef>,
        scope: Option<String>,
        host_namespace: Option<String>,
        conceal: bool,
    ) -> Self {
        Self {
            client,
            wake,
            scope,
            host_namespace,
            conceal,
            state: Arc::default(),
            changed: tokio::sync::watch::channel(0).0,
        }
    }

    /// The objects `rules` select for `parent`, once their watches have
    /// listed (for at most `timeout`), within `bounds`; the rules are kept
    /// so that a change of an object they select queues the parent.
    /// Returns the objects and each rule's `<Kind>.<apiVersion>`.
    pub async fn objects(
        &self,
        parent: &ParentRef,
        rules: Vec<RelatedRule>,
        limits: &crate::runtime::Limits,
        timeout: Duration,
    ) -> Result<(Vec<Arc<DynamicObject>>, Vec<String>), Error> {
        let mut watched = Vec::with_capacity(rules.len());
        for rule in &rules {
            watched.push(self.watch(rule, &limits.privileged).await?);
        }
        let bounds = RelatedBounds::from(limits);
        self.state
            .lock()
            .expect("customized lock")
            .selected
            .insert(parent.clone(), rules.clone());
        let mut objects = Vec::new();
        let mut kinds = Vec::new();
        let mut budget = RelatedBudget::new(bounds);
        for (rule, (store, listing, resource)) in rules.iter().zip(watched) {
            let kind = format!("{}.{}", resource.kind, resource.api_version);
            // Never decided on a half-listed cache, as the child index.
            wait_listed(
                &self.changed,
                timeout,
                std::slice::from_ref(&kind),
                |_| true,
                || {
                    let listing = listing.lock().expect("listing lock");
                    vec![(listing.listed, listing.error.clone())]
                },
            )
            .await?;
            let kind_ref =
                crate::model::KindRef::new(&resource.group, &resource.version, &resource.kind);
            let mut selected: Vec<_> = store
                .state()
                .into_iter()
                .filter(|o| selects(rule, o))
                .collect();
            selected.sort_by(|a, b| {
                (&a.metadata.namespace, &a.metadata.name)
                    .cmp(&(&b.metadata.namespace, &b.metadata.name))
            });
            for object in selected {
                let bytes = serde_json::to_vec(&*object).map_or(0, |v| v.len());
                budget.take(&kind_ref, bytes)?;
                objects.push(object);
            }
            if !kinds.contains(&kind) {
                kinds.push(kind);
            }
        }
        Ok((objects, kinds))
    }

    /// Forgets the rules of every parent `live` does not keep.
    pub fn retain(&self, live: impl Fn(&ParentRef) -> bool) {
        self.state
            .lock()
            .expect("customized lock")
            .selected
            .retain(|parent, _| live(parent));
    }

    /// The store of `rule`'s resource, its watch started if it is the
    /// first rule to name it.
    async fn watch(
        &self,
        rule: &RelatedRule,
        privileged: &PrivilegedKinds,
    ) -> Result<
        (
            reflector::Store<DynamicObject>,
            Arc<Mutex<Listing>>,
            ApiResource,
        ),
        Error,
    > {
        let (resource, namespaced) = self.resolve(&rule.api_version, &rule.resource).await?;
        let kind = crate::model::KindRef::new(&resource.group, &resource.version, &resource.kind);
        if let Some(power) = power_of(&kind)
            && !privileged.allows(&kind)
        {
            return Err(Error::Rule(format!(
                "the customize hook relates {kind}, which grants power ({power}): the guest list must name {:?} in this guest's privilegedKinds",
                privileged_name(&kind)
            )));
        }
        let named = rule.namespace.as_deref().filter(|_| namespaced);
        if named.is_some() && named == self.host_namespace.as_deref() {
            return Err(Error::Rule(format!(
                "the customize hook names namespace {:?}, the wasmop host's own, whose objects are never related",
                named.unwrap_or_default()
            )));
        }
        if let (Some(ns), Some(scope)) = (named, self.scope.as_deref())
            && ns != scope
        {
            return Err(Error::Rule(format!(
                "the customize hook names namespace {ns:?}, outside the guest's namespace {scope:?}"
            )));
        }
        let namespace = self.scope.clone().filter(|_| namespaced);
        let key = (rule.api_version.clone(), rule.resource.clone());
        let mut state = self.state.lock().expect("customized lock");
        if let Some(watch) = state.watches.get(&key) {
            return Ok((
                watch.store.clone(),
                watch.listing.clone(),
                watch.resource.clone(),
            ));
        }
        if state.watches.len() >= MAX_WATCHES {
            return Err(Error::Rule(format!(
                "the customize hooks of this controller name more than {MAX_WATCHES} resources to watch"
            )));
        }
        let api: Api<DynamicObject> = match &namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &resource),
            None => Api::all_with(self.client.clone(), &resource),
        };
        // Nothing in the host's own namespace is ever related: the API
        // server leaves it out of a watch of every namespace.
        let config = match (&namespace, &self.host_namespace) {
            (None, Some(host)) if namespaced => {
                watcher::Config::default().fields(&format!("metadata.namespace!={host}"))
            }
            _ => watcher::Config::default(),
        };
        let writer = reflector::store::Writer::new(resource.clone());
        let store = writer.as_reader();
        let listing = Arc::new(Mutex::new(Listing::default()));
        let conceal = self.conceal && resource.group.is_empty() && resource.kind == "Secret";
        let mut typed = typed_events(resource.clone());
        let events = watcher(api, config)
            .map(move |event| event.map(&mut typed))
            .map(move |event| {
                event.map(|e| {
                    if conceal {
                        e.modify(crate::secrets::conceal_object)
                    } else {
                        e
                    }
                })
            })
            .backoff(crate::retry::watch_backoff());
        let task = tokio::spawn(follow(
            events,
            writer,
            Listed {
                listing: listing.clone(),
                changed: self.changed.clone(),
            },
            key.clone(),
            self.state.clone(),
            self.wake.clone(),
        ))
        .abort_handle();
        state.watches.insert(
            key,
            Watch {
                resource: resource.clone(),
                store: store.clone(),
                listing: listing.clone(),
                task,
            },
        );
        Ok((store, listing, resource))
    }

    /// The resource `resource` of `api_version` as the API server serves it.
    async fn resolve(
        &self,
        api_version: &str,
        resource: &str,
    ) -> Result<(ApiResource, bool), Error> {
        let key = (api_version.to_owned(), resource.to_owned());
        if let Some(found) = self
            .state
            .lock()
            .expect("customized lock")
            .resolved
            .get(&key)
        {
            return Ok(found.clone());
        }
        let not_served = |why: String| {
            Error::Rule(format!(
                "the customize hook names resource {resource:?} of {api_version:?}: {why}"
            ))
        };
        let gv: GroupVersion = api_version
            .parse()
            .map_err(|e| not_served(format!("not an apiVersion ({e})")))?;
        let group = kube::discovery::oneshot::pinned_group(&self.client, &gv)
            .await
            .map_err(|e| not_served(format!("not served ({e})")))?;
        let found = group
            .versioned_resources(&gv.version)
            .into_iter()
            .find(|(ar, _)| ar.plural == resource)
            .map(|(ar, caps)| (ar, caps.scope == kube::discovery::Scope::Namespaced))
            .ok_or_else(|| not_served("not served by the API server".to_owned()))?;
        self.state
            .lock()
            .expect("customized lock")
            .resolved
            .insert(key, found.clone());
        Ok(found)
    }
}

/// Where a watch records that it listed or failed.
struct Listed {
    listing: Arc<Mutex<Listing>>,
    changed: tokio::sync::watch::Sender<u64>,
}

impl Listed {
    fn record(&self, f: impl FnOnce(&mut Listing)) {
        f(&mut self.listing.lock().expect("listing lock"));
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }
}

/// Feeds a watch's events into its store; each object that changes queues
/// the parents whose rules select it.
async fn follow(
    events: impl futures::Stream<Item = Result<watcher::Event<DynamicObject>, watcher::Error>>,
    mut writer: reflector::store::Writer<DynamicObject>,
    listed: Listed,
    key: WatchKey,
    state: Arc<Mutex<State>>,
    wake: tokio::sync::mpsc::UnboundedSender<ParentRef>,
) {
    let mut events = std::pin::pin!(events);
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(event) => event,
            Err(e) => {
                tracing::warn!(resource = %key.1, "watch of a customize hook's related resource failed, retrying: {e}");
                listed.record(|l| l.error = Some(e.to_string()));
                continue;
            }
        };
        writer.apply_watcher_event(&event);
        let changed: Vec<&DynamicObject> = match &event {
            watcher::Event::Apply(o) | watcher::Event::Delete(o) => vec![o],
            watcher::Event::InitDone => {
                listed.record(|l| {
                    l.listed = true;
                    l.error = None;
                });
                Vec::new()
            }
            watcher::Event::Init | watcher::Event::InitApply(_) => Vec::new(),
        };
        if changed.is_empty() {
            continue;
        }
        let parents: Vec<ParentRef> = {
            let state = state.lock().expect("customized lock");
            state
                .selected
                .iter()
                .filter(|(_, rules)| {
                    rules.iter().any(|rule| {
                        rule.api_version == key.0
                            && rule.resource == key.1
                            && changed.iter().any(|o| selects(rule, o))
                    })
                })
                .map(|(parent, _)| parent.clone())
                .collect()
        };
        for parent in parents {
            let _ = wake.send(parent);
        }
    }
}

/// Whether `rule` selects `object`.
fn selects(rule: &RelatedRule, object: &DynamicObject) -> bool {
    use kube::ResourceExt as _;
    rule.namespace.as_deref().is_none_or(|ns| {
        object
            .metadata
            .namespace
            .as_deref()
            .is_none_or(|own| own == ns)
    }) && rule
        .names
        .as_ref()
        .is_none_or(|names| names.iter().any(|n| *n == object.name_any()))
        && rule
            .labels
            .as_ref()
            .is_none_or(|selector| selector.matches(object.labels()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rule(
        namespace: Option<&str>,
        names: Option<&[&str]>,
        labels: Option<(&str, &str)>,
    ) -> RelatedRule {
        RelatedRule {
            api_version: "v1".into(),
            resource: "configmaps".into(),
            namespace: namespace.map(str::to_owned),
            names: names.map(|n| n.iter().map(|s| (*s).to_owned()).collect()),
            labels: labels.map(|(k, v)| {
                kube::core::Selector::from_iter([kube::core::Expression::Equal(k.into(), v.into())])
            }),
        }
    }

    #[test]
    fn a_rule_selects_by_namespace_names_and_labels() {
        let cm = |ns: &str, name: &str, app: &str| -> DynamicObject {
            serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": ns, "labels": {"app": app}}}))
            .unwrap()
        };
        let source = cm("default", "settings", "a");
        // (rule, selects the source)
        let cases = [
            (rule(None, None, None), true),
            (rule(Some("default"), None, None), true),
            (rule(Some("other"), None, None), false),
            (rule(Some("default"), Some(&["settings"]), None), true),
            (rule(Some("default"), Some(&["other"]), None), false),
            (rule(None, None, Some(("app", "a"))), true),
            (rule(None, None, Some(("app", "b"))), false),
        ];
        for (rule, want) in cases {
            assert_eq!(selects(&rule, &source), want, "{rule:?}");
        }
    }
}
