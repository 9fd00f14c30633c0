//! Related kinds: objects a guest reads beside its children (a Secret with
//! a password, a ConfigMap many parents share) but the host never writes.
//!
//! Each related kind is watched in the scope's namespace (metadata only if
//! the guest asked for that), its objects kept by namespace and name, as
//! compact objects (metadata parsed, the rest JSON text: [`Compact`]);
//! related Secrets enter the cache concealed unless the guest may see their
//! values ([`crate::secrets`]). Beside the objects the index keeps what
//! every parent points at, per kind: the name at its pointer, the label
//! selector at its pointer, or its whole namespace. So a reconcile gets the
//! objects of its parent with one lookup per kind, and an added, changed or
//! deleted object queues exactly the parents it maps to (under its old
//! labels and its new ones), found by name or by namespace, never by
//! scanning every parent.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use kube::ResourceExt;
use kube::api::DynamicObject;
use kube::core::{Selector, SelectorExt};
use kube::runtime::watcher;
use serde_json::Value;

use super::compact::Compact;
use super::index::NotReady;
use crate::model::{RelatedBy, RelatedKind};

/// How much of the related objects one request may hold (a guest's
/// `maxRelatedObjects` and `maxRelatedBytes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RelatedBounds {
    /// Most objects.
    pub objects: usize,
    /// Most bytes, about the objects' JSON size.
    pub bytes: usize,
}

impl RelatedBounds {
    /// No bound.
    pub const NONE: Self = Self {
        objects: usize::MAX,
        bytes: usize::MAX,
    };
}

impl From<&crate::runtime::Limits> for RelatedBounds {
    fn from(limits: &crate::runtime::Limits) -> Self {
        Self {
            objects: limits.max_related_objects,
            bytes: limits.max_related_bytes,
        }
    }
}

/// What is left of [`RelatedBounds`] while a request's related objects are
/// gathered (the host's, `render`'s and `plan`'s alike).
#[derive(Debug)]
pub struct RelatedBudget {
    bounds: RelatedBounds,
    objects: usize,
    bytes: usize,
}

impl RelatedBudget {
    /// A budget of `bounds`, nothing taken.
    pub fn new(bounds: RelatedBounds) -> Self {
        Self {
            bounds,
            objects: 0,
            bytes: 0,
        }
    }

    /// Takes one object of `kind` and about `bytes`, or says which kind
    /// went past the bounds.
    pub fn take(
        &mut self,
        kind: &crate::model::KindRef,
        bytes: usize,
    ) -> Result<(), RelatedTooLarge> {
        self.objects += 1;
        self.bytes += bytes;
        if self.objects > self.bounds.objects || self.bytes > self.bounds.bytes {
            return Err(RelatedTooLarge {
                kind: kind.to_string(),
                objects: self.bounds.objects,
                bytes: self.bounds.bytes,
            });
        }
        Ok(())
    }
}

/// A request would hold more related objects than the guest may get.
#[derive(Debug, thiserror::Error)]
#[error(
    "the related objects of kind {kind} pass the guest's bounds (maxRelatedObjects {objects}, maxRelatedBytes {bytes}): narrow what the guest relates, or raise the bounds in the guest list"
)]
pub struct RelatedTooLarge {
    /// The kind whose objects crossed a bound.
    pub kind: String,
    /// The object bound.
    pub objects: usize,
    /// The byte bound.
    pub bytes: usize,
}

/// A parent, as `(namespace, name)`.
pub type ParentKey = (Option<String>, String);

/// What one parent points at in one related kind.
#[derive(Clone, Debug)]
enum Want {
    Name(String),
    Selector(Selector),
    Namespace,
}

/// The objects and the parents' pointers of one related kind.
#[derive(Default)]
struct KindState {
    /// namespace → name → object: a reconcile reads one namespace's
    /// objects, in name order, without touching the others.
    objects: HashMap<String, BTreeMap<String, Arc<Compact>>>,
    /// Objects of a re-list in progress, swapped in at its end.
    relist: Option<Vec<Arc<Compact>>>,
    ready: bool,
    error: Option<String>,
    /// parent → what it points at.
    wants: HashMap<ParentKey, Want>,
    /// (namespace, name) → the parents that point at that name.
    by_name: HashMap<(String, String), HashSet<ParentKey>>,
    /// namespace → the parents that select objects there (by selector or
    /// the whole namespace).
    by_namespace: HashMap<String, HashSet<ParentKey>>,
}

/// The related objects of one controller scope and the parents they map
/// to.
pub struct RelatedIndex {
    kinds: Vec<RelatedKind>,
    state: RwLock<Vec<KindState>>,
    changed: tokio::sync::watch::Sender<u64>,
}

impl RelatedIndex {
    /// An empty index for the related kinds `kinds`.
    pub fn new(kinds: Vec<RelatedKind>) -> Self {
        let state = kinds.iter().map(|_| KindState::default()).collect();
        Self {
            kinds,
            state: RwLock::new(state),
            changed: tokio::sync::watch::channel(0).0,
        }
    }

    /// Whether any kind is related.
    pub fn is_empty(&self) -> bool {
        self.kinds.is_empty()
    }

    /// Records what `parent` points at now; returns nothing (a parent's
    /// own change queues it anyway).
    pub fn parent_applied(&self, parent: &DynamicObject) {
        let key = parent_key(parent);
        let namespace = parent.namespace().unwrap_or_default();
        let mut state = self.state.write().expect("related lock");
        for (kind, declared) in state.iter_mut().zip(&self.kinds) {
            let want = want_of(&declared.by, &parent.data, parent);
            kind.unlink(&key, &namespace);
            if let Some(want) = want {
                match &want {
                    Want::Name(name) => {
                        kind.by_name
                            .entry((namespace.clone(), name.clone()))
                            .or_default()
                            .insert(key.clone());
                    }
                    Want::Selector(_) | Want::Namespace => {
                        kind.by_namespace
                            .entry(namespace.clone())
                            .or_default()
                            .insert(key.clone());
                    }
                }
                kind.wants.insert(key.clone(), want);
            }
        }
    }

    /// Forgets a deleted parent.
    pub fn parent_deleted(&self, parent: &DynamicObject) {
        let key = parent_key(parent);
        let namespace = parent.namespace().unwrap_or_default();
        let mut state = self.state.write().expect("related lock");
        for kind in state.iter_mut() {
            kind.unlink(&key, &namespace);
        }
    }

    /// Forgets the pointers of every parent `live` says is gone.
    pub fn retain_parents(&self, mut live: impl FnMut(&ParentKey) -> bool) {
        let mut state = self.state.write().expect("related lock");
        for kind in state.iter_mut() {
            let gone: Vec<ParentKey> = kind.wants.keys().filter(|p| !live(p)).cloned().collect();
            for parent in gone {
                let namespace = parent.0.clone().unwrap_or_default();
                kind.unlink(&parent, &namespace);
            }
        }
    }

    /// Feeds one event of related kind `kind`'s watch into the index and
    /// returns the parents it maps to (before and after the change).
    pub fn apply(&self, kind: usize, event: watcher::Event<DynamicObject>) -> Vec<ParentKey> {
        let mut state = self.state.write().expect("related lock");
        let k = &mut state[kind];
        let mut touched: Vec<Arc<Compact>> = Vec::new();
        match event {
            watcher::Event::Apply(object) => {
                let object = Arc::new(Compact::from(object));
                let (namespace, name) = object_key(&*object);
                if let Some(old) = k
                    .objects
                    .entry(namespace)
                    .or_default()
                    .insert(name, object.clone())
                {
                    touched.push(old);
                }
                touched.push(object);
            }
            watcher::Event::Delete(object) => {
                let (namespace, name) = object_key(&object);
                if let Some(names) = k.objects.get_mut(&namespace) {
                    if let Some(old) = names.remove(&name) {
                        touched.push(old);
                    }
                    if names.is_empty() {
                        k.objects.remove(&namespace);
                    }
                }
            }
            watcher::Event::Init => k.relist = Some(Vec::new()),
            watcher::Event::InitApply(object) => {
                if let Some(buffer) = k.relist.as_mut() {
                    buffer.push(Arc::new(Compact::from(object)));
                }
            }
            watcher::Event::InitDone => {
                let mut listed: HashMap<String, BTreeMap<String, Arc<Compact>>> = HashMap::new();
                for object in k.relist.take().unwrap_or_default() {
                    let (namespace, name) = object_key(&*object);
                    listed.entry(namespace).or_default().insert(name, object);
                }
                let lookup = |objects: &HashMap<String, BTreeMap<String, Arc<Compact>>>,
                              namespace: &str,
                              name: &str| {
                    objects.get(namespace).and_then(|n| n.get(name)).cloned()
                };
                // What the re-list changed, added or dropped.
                for (namespace, names) in &k.objects {
                    for (name, old) in names {
                        match lookup(&listed, namespace, name) {
                            Some(new) if new.resource_version() == old.resource_version() => {}
                            Some(new) => touched.extend([old.clone(), new]),
                            None => touched.push(old.clone()),
                        }
                    }
                }
                for (namespace, names) in &listed {
                    for (name, new) in names {
                        if lookup(&k.objects, namespace, name).is_none() {
                            touched.push(new.clone());
                        }
                    }
                }
                k.objects = listed;
                k.ready = true;
                k.error = None;
            }
        }
        let mut parents: HashSet<ParentKey> = HashSet::new();
        for object in &touched {
            parents.extend(k.parents_of(object));
        }
        drop(state);
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
        parents.into_iter().collect()
    }

    /// Records that related kind `kind`'s watch failed.
    pub fn fail(&self, kind: usize, error: String) {
        self.state.write().expect("related lock")[kind].error = Some(error);
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// The related objects of `parent`, by kind (in declaration order),
    /// then name, parsed whole again.
    pub fn objects_of(&self, parent: &DynamicObject) -> Vec<Arc<DynamicObject>> {
        self.objects_of_declared(parent, |_| true, &RelatedBounds::NONE)
            .unwrap_or_default()
    }

    /// [`Self::objects_of`] under the declarations `declared` keeps only
    /// (during a rollout the index holds both versions' declarations, and
    /// each version gets what it declared), within `bounds`: past them,
    /// nothing is parsed and the kind that crossed them is named.
    pub fn objects_of_declared(
        &self,
        parent: &DynamicObject,
        mut declared_by: impl FnMut(&RelatedKind) -> bool,
        bounds: &RelatedBounds,
    ) -> Result<Vec<Arc<DynamicObject>>, RelatedTooLarge> {
        let namespace = parent.namespace().unwrap_or_default();
        let state = self.state.read().expect("related lock");
        let mut found: Vec<&Arc<Compact>> = Vec::new();
        let mut budget = RelatedBudget::new(*bounds);
        for (kind, declared) in state.iter().zip(&self.kinds) {
            if !declared_by(declared) {
                continue;
            }
            let Some(want) = want_of(&declared.by, &parent.data, parent) else {
                continue;
            };
            let Some(names) = kind.objects.get(&namespace) else {
                continue;
            };
            let matching: Box<dyn Iterator<Item = &Arc<Compact>>> = match want {
                Want::Name(name) => Box::new(names.get(&name).into_iter()),
                Want::Selector(selector) => {
                    Box::new(names.values().filter(move |o| selector.matches(o.labels())))
                }
                Want::Namespace => Box::new(names.values()),
            };
            for object in matching {
                budget.take(&declared.kind, object.approx_bytes())?;
                found.push(object);
            }
        }
        Ok(found.into_iter().map(|o| Arc::new(o.object())).collect())
    }

    /// Waits until every related kind has listed once, for at most
    /// `timeout`; a kind whose watch fails before its first list fails at
    /// once. `names` name the kinds in errors.
    pub async fn wait_ready(
        &self,
        timeout: Duration,
        names: &[String],
        wanted: impl Fn(usize) -> bool,
    ) -> Result<(), NotReady> {
        super::index::wait_listed(&self.changed, timeout, names, wanted, || {
            let state = self.state.read().expect("related lock");
            state.iter().map(|k| (k.ready, k.error.clone())).collect()
        })
        .await
    }
}

impl KindState {
    /// Drops `parent` from the name and namespace indexes.
    fn unlink(&mut self, parent: &ParentKey, namespace: &str) {
        match self.wants.remove(parent) {
            Some(Want::Name(name)) => {
                let key = (namespace.to_owned(), name);
                if let Some(set) = self.by_name.get_mut(&key) {
                    set.remove(parent);
                    if set.is_empty() {
                        self.by_name.remove(&key);
                    }
                }
            }
            Some(Want::Selector(_) | Want::Namespace) => {
                if let Some(set) = self.by_namespace.get_mut(namespace) {
                    set.remove(parent);
                    if set.is_empty() {
                        self.by_namespace.remove(namespace);
                    }
                }
            }
            None => {}
        }
    }

    /// The parents `object` maps to as it is.
    fn parents_of(&self, object: &Compact) -> Vec<ParentKey> {
        let (namespace, name) = object_key(object);
        let mut out: Vec<ParentKey> = self
            .by_name
            .get(&(namespace.clone(), name))
            .into_iter()
            .flatten()
            .cloned()
            .collect();
        for parent in self.by_namespace.get(&namespace).into_iter().flatten() {
            match self.wants.get(parent) {
                Some(Want::Selector(selector)) if selector.matches(object.labels()) => {
                    out.push(parent.clone());
                }
                Some(Want::Namespace) => out.push(parent.clone()),
                _ => {}
            }
        }
        out
    }
}

fn parent_key(parent: &DynamicObject) -> ParentKey {
    (parent.namespace(), parent.name_any())
}

fn object_key(object: &impl ResourceExt) -> (String, String) {
    (object.namespace().unwrap_or_default(), object.name_any())
}

/// What `parent` (its `data`, i.e. everything but metadata, and its
/// metadata) points at under `by`; `None` when it points at nothing.
fn want_of(by: &RelatedBy, data: &Value, parent: &DynamicObject) -> Option<Want> {
    match by {
        RelatedBy::NameAt(pointer) => at(pointer, data, parent)?
            .as_str()
            .filter(|name| !name.is_empty())
            .map(|name| Want::Name(name.to_owned())),
        RelatedBy::SelectorAt(pointer) => selector(&at(pointer, data, parent)?).map(Want::Selector),
        RelatedBy::Namespace => Some(Want::Namespace),
    }
}

/// The value at `pointer` in the whole parent (metadata included).
fn at(pointer: &str, data: &Value, parent: &DynamicObject) -> Option<Value> {
    if pointer.starts_with("/metadata") {
        let metadata = serde_json::to_value(&parent.metadata).ok()?;
        let whole = serde_json::json!({"metadata": metadata});
        return whole.pointer(pointer).cloned();
    }
    data.pointer(pointer).cloned()
}

/// A label selector: a map of labels, or a LabelSelector with
/// `matchLabels` and `matchExpressions`; `None` for anything else.
fn selector(value: &Value) -> Option<Selector> {
    let object = value.as_object()?;
    if object.contains_key("matchLabels") || object.contains_key("matchExpressions") {
        let parsed: k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector =
            serde_json::from_value(value.clone()).ok()?;
        return Selector::try_from(parsed).ok();
    }
    let labels: BTreeMap<String, String> = serde_json::from_value(value.clone()).ok()?;
    Some(labels.into_iter().collect())
}

/// The related objects `parent` maps to among `candidates` (for `wasmop
/// render`, which has no cluster): the same rules as the index.
pub fn select<'a>(
    declared: &RelatedKind,
    parent: &DynamicObject,
    candidates: impl Iterator<Item = &'a DynamicObject>,
) -> Vec<&'a DynamicObject> {
    let Some(want) = want_of(&declared.by, &parent.data, parent) else {
        return Vec::new();
    };
    let namespace = parent.namespace().unwrap_or_default();
    let mut found: Vec<&DynamicObject> = candidates
        .filter(|o| {
            o.types
                .as_ref()
                .is_some_and(|t| declared.kind.matches(&t.api_version, &t.kind))
        })
        .filter(|o| o.namespace().unwrap_or_else(|| namespace.clone()) == namespace)
        .filter(|o| match &want {
            Want::Name(name) => o.name_any() == *name,
            Want::Selector(selector) => selector.matches(o.labels()),
            Want::Namespace => true,
        })
        .collect();
    found.sort_by_key(|o| o.name_any());
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::KindRef;
    use serde_json::json;

    fn object(kind: &str, ns: &str, name: &str, labels: Value, rv: &str) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": kind,
            "metadata": {"name": name, "namespace": ns, "labels": labels, "resourceVersion": rv},
        }))
        .unwrap()
    }

    fn parent(name: &str, spec: Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "apps.example.com/v1alpha1", "kind": "Cache",
            "metadata": {"name": name, "namespace": "ns"}, "spec": spec,
        }))
        .unwrap()
    }

    fn index() -> RelatedIndex {
        RelatedIndex::new(vec![
            RelatedKind::name_at(KindRef::new("", "v1", "Secret"), "/spec/secret"),
            RelatedKind::selector_at(KindRef::new("", "v1", "ConfigMap"), "/spec/selector"),
        ])
    }

    fn key(name: &str) -> ParentKey {
        (Some("ns".into()), name.into())
    }

    #[test]
    fn a_named_object_maps_to_exactly_the_parents_that_name_it() {
        let idx = index();
        idx.parent_applied(&parent("a", json!({"secret": "auth"})));
        idx.parent_applied(&parent("b", json!({"secret": "auth"})));
        idx.parent_applied(&parent("c", json!({"secret": "other"})));
        let mut hit = idx.apply(
            0,
            watcher::Event::Apply(object("Secret", "ns", "auth", json!({}), "1")),
        );
        hit.sort();
        assert_eq!(hit, [key("a"), key("b")]);
        assert!(
            idx.apply(
                0,
                watcher::Event::Apply(object("Secret", "elsewhere", "auth", json!({}), "2"))
            )
            .is_empty()
        );
        assert_eq!(
            idx.objects_of(&parent("a", json!({"secret": "auth"})))
                .len(),
            1
        );
        // b now points elsewhere: a change of auth is no longer b's.
        idx.parent_applied(&parent("b", json!({"secret": "other"})));
        assert_eq!(
            idx.apply(
                0,
                watcher::Event::Delete(object("Secret", "ns", "auth", json!({}), "3"))
            ),
            [key("a")]
        );
        assert!(
            idx.objects_of(&parent("a", json!({"secret": "auth"})))
                .is_empty()
        );
        idx.parent_deleted(&parent("c", json!({})));
        assert!(
            idx.apply(
                0,
                watcher::Event::Apply(object("Secret", "ns", "other", json!({}), "4"))
            ) == [key("b")]
        );
    }

    #[test]
    fn a_selected_object_maps_under_its_old_and_its_new_labels() {
        let idx = index();
        idx.parent_applied(&parent("red", json!({"selector": {"color": "red"}})));
        idx.parent_applied(&parent("blue", json!({"selector": {"matchExpressions": [{"key": "color", "operator": "In", "values": ["blue"]}]}})));
        idx.parent_applied(&parent("none", json!({})));
        assert_eq!(
            idx.apply(
                1,
                watcher::Event::Apply(object("ConfigMap", "ns", "x", json!({"color": "red"}), "1"))
            ),
            [key("red")]
        );
        let mut moved = idx.apply(
            1,
            watcher::Event::Apply(object(
                "ConfigMap",
                "ns",
                "x",
                json!({"color": "blue"}),
                "2",
            )),
        );
        moved.sort();
        assert_eq!(moved, [key("blue"), key("red")]);
        assert_eq!(idx.objects_of(&parent("blue", json!({"selector": {"matchExpressions": [{"key": "color", "operator": "In", "values": ["blue"]}]}}))).len(), 1);
        assert!(idx.objects_of(&parent("none", json!({}))).is_empty());
    }

    #[test]
    fn a_request_past_the_bounds_names_the_kind_instead_of_growing() {
        let idx = index();
        let red = parent("red", json!({"selector": {"color": "red"}}));
        idx.parent_applied(&red);
        for i in 0..5 {
            idx.apply(
                1,
                watcher::Event::Apply(object(
                    "ConfigMap",
                    "ns",
                    &format!("cm-{i}"),
                    json!({"color": "red"}),
                    "1",
                )),
            );
        }
        let all = |_: &RelatedKind| true;
        let bounds = |objects, bytes| RelatedBounds { objects, bytes };
        assert_eq!(
            idx.objects_of_declared(&red, all, &bounds(5, usize::MAX))
                .unwrap()
                .len(),
            5
        );
        let too_many = idx
            .objects_of_declared(&red, all, &bounds(4, usize::MAX))
            .unwrap_err();
        assert_eq!(too_many.kind, "v1/ConfigMap");
        assert!(
            too_many.to_string().contains("maxRelatedObjects 4"),
            "{too_many}"
        );
        // Five small objects are about 1.5 kB: a 1 kB bound refuses them.
        let too_big = idx
            .objects_of_declared(&red, all, &bounds(256, 1024))
            .unwrap_err();
        assert!(
            too_big.to_string().contains("maxRelatedBytes 1024"),
            "{too_big}"
        );
    }

    #[test]
    fn a_budget_names_the_kind_that_passes_it() {
        let kind = KindRef::new("", "v1", "Secret");
        let mut budget = RelatedBudget::new(RelatedBounds {
            objects: 2,
            bytes: 100,
        });
        assert!(budget.take(&kind, 40).is_ok());
        assert!(budget.take(&kind, 40).is_ok());
        let err = budget.take(&kind, 1).unwrap_err();
        assert_eq!(err.kind, "v1/Secret");
        let mut bytes = RelatedBudget::new(RelatedBounds {
            objects: 10,
            bytes: 100,
        });
        assert!(bytes.take(&kind, 101).is_err());
    }

    #[test]
    fn a_relist_maps_only_what_it_changed() {
        let idx = index();
        idx.parent_applied(&parent("a", json!({"secret": "s1"})));
        idx.parent_applied(&parent("b", json!({"secret": "s2"})));
        idx.apply(0, watcher::Event::Init);
        idx.apply(
            0,
            watcher::Event::InitApply(object("Secret", "ns", "s1", json!({}), "1")),
        );
        idx.apply(
            0,
            watcher::Event::InitApply(object("Secret", "ns", "s2", json!({}), "1")),
        );
        idx.apply(0, watcher::Event::InitDone);
        idx.apply(0, watcher::Event::Init);
        idx.apply(
            0,
            watcher::Event::InitApply(object("Secret", "ns", "s1", json!({}), "1")),
        );
        assert_eq!(
            idx.apply(0, watcher::Event::InitDone),
            [key("b")],
            "s2 vanished"
        );
    }

    #[test]
    fn render_selects_by_the_same_rules() {
        let declared = RelatedKind::name_at(KindRef::new("", "v1", "Secret"), "/spec/secret");
        let p = parent("a", json!({"secret": "auth"}));
        let objects = [
            object("Secret", "ns", "auth", json!({}), "1"),
            object("Secret", "ns", "other", json!({}), "1"),
            object("ConfigMap", "ns", "auth", json!({}), "1"),
        ];
        let found = select(&declared, &p, objects.iter());
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].types.as_ref().unwrap().kind, "Secret");
    }
}
