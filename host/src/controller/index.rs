//! The children of every parent, indexed by the parent's UID.
//!
//! Each child kind's watch feeds this index instead of a plain reflector
//! store: a reconcile looks its parent's children up by UID (one map
//! lookup) instead of scanning every cached child of every kind, which at
//! 1,000 parents × 10 children is the difference between a few lookups and
//! ten million comparisons per resync wave. The index also knows, per
//! kind, whether the initial list arrived and the last error of its watch,
//! so a reconcile neither decides on a half-filled cache nor waits for ever
//! on a watch the API server refuses.
//!
//! A child is held as its JSON text ([`Cached`]) and parsed again when a
//! reconcile reads it. A `DynamicObject` keeps its body as a
//! `serde_json::Value` tree, where every small map is a B-tree node, so a
//! tree takes several times the JSON it was parsed from. The text costs
//! what the object weighs; a reconcile pays for it with one parse per
//! child (docs/decisions/0018-cached-objects-as-json-text.md).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use kube::ResourceExt;
use kube::api::DynamicObject;
use kube::runtime::watcher;

/// A child's place in the index: its kind (index into the guest's child
/// kinds), namespace and name (children of a cluster-scoped parent may
/// share a name across namespaces).
pub type ChildKey = (usize, Option<String>, String);

/// The owner-UID index of one controller's children.
#[derive(Debug)]
pub struct ChildIndex {
    state: RwLock<State>,
    changed: tokio::sync::watch::Sender<u64>,
}

#[derive(Debug)]
struct State {
    kinds: Vec<KindState>,
    /// Parent UID → its children's JSON text, sorted by kind and name.
    by_owner: HashMap<String, BTreeMap<ChildKey, Arc<str>>>,
}

#[derive(Debug, Default)]
struct KindState {
    /// (namespace, name) → the controller owner's UID, for every cached
    /// object of the kind that has one.
    owners: HashMap<(Option<String>, String), String>,
    /// Objects of a re-list in progress, swapped in at its end.
    relist: Option<Vec<Cached>>,
    /// The first complete list has arrived.
    ready: bool,
    /// The last error of the watch, cleared once it works again.
    error: Option<String>,
}

/// Why the children of a parent cannot be known.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotReady {
    /// A watch failed (RBAC, a kind the server no longer serves, the API
    /// server unreachable) and has not listed its kind since.
    #[error("the watch of {kind} (a child or related kind) is failing: {error}")]
    WatchFailed {
        /// The child or related kind.
        kind: String,
        /// The watch's last error.
        error: String,
    },
    /// The initial lists did not arrive in time.
    #[error("the caches of the child and related kinds did not sync within {0:?}")]
    Timeout(Duration),
}

/// A child on its way into the index: the object as compact JSON text,
/// with what the index files it under (the index keeps only the text).
#[derive(Debug)]
struct Cached {
    namespace: Option<String>,
    name: String,
    owner: Option<String>,
    text: Arc<str>,
}

impl Cached {
    fn new(object: &DynamicObject) -> Self {
        Self {
            namespace: object.namespace(),
            name: object.name_any(),
            owner: controller_uid(object).map(str::to_owned),
            text: serde_json::to_string(object)
                .expect("objects serialise")
                .into(),
        }
    }

    fn parse(text: &str) -> DynamicObject {
        // The text is serde_json's own rendering of a DynamicObject.
        serde_json::from_str(text).expect("a cached object parses")
    }
}

/// The controller ownerReference's UID of `object`.
pub fn controller_uid(object: &DynamicObject) -> Option<&str> {
    object
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true))
        .map(|o| o.uid.as_str())
}

impl ChildIndex {
    /// An empty index for `kinds` child kinds.
    pub fn new(kinds: usize) -> Self {
        let (changed, _) = tokio::sync::watch::channel(0);
        Self {
            state: RwLock::new(State {
                kinds: (0..kinds).map(|_| KindState::default()).collect(),
                by_owner: HashMap::new(),
            }),
            changed,
        }
    }

    /// The children of the parent `uid`, sorted by kind and name (the guest
    /// sees the same input for the same state).
    pub fn children_of(&self, uid: &str) -> Vec<(usize, Arc<DynamicObject>)> {
        let texts: Vec<(usize, Arc<str>)> = {
            let state = self.state.read().expect("index lock");
            state
                .by_owner
                .get(uid)
                .map(|children| {
                    children
                        .iter()
                        .map(|((kind, _, _), text)| (*kind, text.clone()))
                        .collect()
                })
                .unwrap_or_default()
        };
        // Parsed outside the lock: the watches keep feeding the index.
        texts
            .into_iter()
            .map(|(kind, text)| (kind, Arc::new(Cached::parse(&text))))
            .collect()
    }

    /// How many objects of each child kind the index holds (those with a
    /// controller owner).
    pub fn counts(&self) -> Vec<usize> {
        let state = self.state.read().expect("index lock");
        state.kinds.iter().map(|k| k.owners.len()).collect()
    }

    /// How many parents have children in the index.
    pub fn parents(&self) -> usize {
        self.state.read().expect("index lock").by_owner.len()
    }

    /// Feeds one event of kind `kind`'s watch into the index.
    pub fn apply(&self, kind: usize, event: &watcher::Event<DynamicObject>) {
        // Objects are serialised before the lock is taken: reconciles read
        // meanwhile.
        let lock = || self.state.write().expect("index lock");
        match event {
            watcher::Event::Apply(object) => {
                let cached = Cached::new(object);
                lock().upsert(kind, cached);
            }
            watcher::Event::Delete(object) => lock().remove(kind, object),
            watcher::Event::Init => lock().kinds[kind].relist = Some(Vec::new()),
            watcher::Event::InitApply(object) => {
                let cached = Cached::new(object);
                if let Some(buffer) = lock().kinds[kind].relist.as_mut() {
                    buffer.push(cached);
                }
            }
            watcher::Event::InitDone => {
                let mut state = lock();
                let listed = state.kinds[kind].relist.take().unwrap_or_default();
                state.replace(kind, listed);
                let kind_state = &mut state.kinds[kind];
                kind_state.ready = true;
                kind_state.error = None;
            }
        }
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Records that kind `kind`'s watch failed (it retries with backoff).
    pub fn fail(&self, kind: usize, error: String) {
        self.state.write().expect("index lock").kinds[kind].error = Some(error);
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// The last error of kind `kind`'s watch, if it is failing.
    pub fn error(&self, kind: usize) -> Option<String> {
        self.state.read().expect("index lock").kinds[kind]
            .error
            .clone()
    }

    /// Waits until every kind `wanted` names (by index) has listed once,
    /// for at most `timeout`. A kind whose watch is failing and has never
    /// listed fails at once with its error; one that listed before keeps
    /// serving its last state. A kind not wanted is not waited for.
    pub async fn wait_ready(
        &self,
        timeout: Duration,
        names: &[String],
        wanted: impl Fn(usize) -> bool,
    ) -> Result<(), NotReady> {
        wait_listed(&self.changed, timeout, names, wanted, || {
            let state = self.state.read().expect("index lock");
            state
                .kinds
                .iter()
                .map(|k| (k.ready, k.error.clone()))
                .collect()
        })
        .await
    }
}

/// Waits until every watched kind `wanted` names has listed once, for at
/// most `timeout`, woken by `changed`; `kinds` reads each kind's (listed,
/// last error). A kind whose watch is failing and has never listed fails at
/// once with its error, named by `names`. Shared by the child index and the
/// related objects.
pub(super) async fn wait_listed(
    changed: &tokio::sync::watch::Sender<u64>,
    timeout: Duration,
    names: &[String],
    wanted: impl Fn(usize) -> bool,
    kinds: impl Fn() -> Vec<(bool, Option<String>)>,
) -> Result<(), NotReady> {
    let mut changed = changed.subscribe();
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let kinds: Vec<_> = kinds()
            .into_iter()
            .enumerate()
            .filter(|(i, _)| wanted(*i))
            .collect();
        if let Some((i, (_, error))) = kinds
            .iter()
            .find(|(_, (ready, error))| !ready && error.is_some())
        {
            return Err(NotReady::WatchFailed {
                kind: names.get(*i).cloned().unwrap_or_default(),
                error: error.clone().unwrap_or_default(),
            });
        }
        if kinds.iter().all(|(_, (ready, _))| *ready) {
            return Ok(());
        }
        match tokio::time::timeout_at(deadline, changed.changed()).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) | Err(_) => return Err(NotReady::Timeout(timeout)),
        }
    }
}

impl State {
    fn upsert(&mut self, kind: usize, object: Cached) {
        let Cached {
            namespace,
            name,
            owner,
            text,
        } = object;
        let key = (namespace, name);
        let previous = match &owner {
            Some(uid) => self.kinds[kind].owners.insert(key.clone(), uid.clone()),
            None => self.kinds[kind].owners.remove(&key),
        };
        let child_key = (kind, key.0, key.1);
        if let Some(old) = previous.filter(|old| Some(old) != owner.as_ref()) {
            self.unlink(&old, &child_key);
        }
        if let Some(uid) = owner {
            self.by_owner
                .entry(uid)
                .or_default()
                .insert(child_key, text);
        }
    }

    fn remove(&mut self, kind: usize, object: &DynamicObject) {
        let key = (object.namespace(), object.name_any());
        if let Some(uid) = self.kinds[kind].owners.remove(&key) {
            self.unlink(&uid, &(kind, key.0, key.1));
        }
    }

    fn unlink(&mut self, owner: &str, child: &ChildKey) {
        if let Some(children) = self.by_owner.get_mut(owner) {
            children.remove(child);
            if children.is_empty() {
                self.by_owner.remove(owner);
            }
        }
    }

    /// Replaces every object of `kind` with `listed` (a re-list): objects
    /// that were not listed again are gone.
    fn replace(&mut self, kind: usize, listed: Vec<Cached>) {
        let old: Vec<_> = self.kinds[kind].owners.drain().collect();
        for ((namespace, name), uid) in old {
            self.unlink(&uid, &(kind, namespace, name));
        }
        for object in listed {
            self.upsert(kind, object);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn child(name: &str, owner: Option<&str>) -> DynamicObject {
        let refs = owner.map_or_else(Vec::new, |uid| {
            vec![json!({"apiVersion": "v1", "kind": "P", "name": "p", "uid": uid, "controller": true})]
        });
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "ns", "ownerReferences": refs},
        }))
        .unwrap()
    }

    fn names(index: &ChildIndex, uid: &str) -> Vec<String> {
        index
            .children_of(uid)
            .iter()
            .map(|(k, c)| format!("{k}:{}", c.name_any()))
            .collect()
    }

    #[test]
    fn children_are_found_by_their_controllers_uid_sorted_by_kind_and_name() {
        let index = ChildIndex::new(2);
        index.apply(1, &watcher::Event::Apply(child("b", Some("u1"))));
        index.apply(0, &watcher::Event::Apply(child("z", Some("u1"))));
        index.apply(0, &watcher::Event::Apply(child("a", Some("u2"))));
        index.apply(0, &watcher::Event::Apply(child("orphan", None)));
        assert_eq!(names(&index, "u1"), ["0:z", "1:b"]);
        assert_eq!(names(&index, "u2"), ["0:a"]);
        assert_eq!(index.parents(), 2);
    }

    #[test]
    fn a_child_comes_back_as_it_went_in() {
        let index = ChildIndex::new(1);
        let mut object = child("c", Some("u1"));
        object.data = json!({"data": {"k": "v", "n": "1"}, "immutable": false});
        object.metadata.labels = Some([("a".to_owned(), "b".to_owned())].into());
        index.apply(0, &watcher::Event::Apply(object.clone()));
        let children = index.children_of("u1");
        assert_eq!(children.len(), 1);
        assert_eq!(
            serde_json::to_value(&*children[0].1).unwrap(),
            serde_json::to_value(&object).unwrap()
        );
    }

    #[test]
    fn a_changed_owner_moves_the_child_and_a_delete_removes_it() {
        let index = ChildIndex::new(1);
        index.apply(0, &watcher::Event::Apply(child("c", Some("u1"))));
        index.apply(0, &watcher::Event::Apply(child("c", Some("u2"))));
        assert!(names(&index, "u1").is_empty());
        assert_eq!(names(&index, "u2"), ["0:c"]);
        index.apply(0, &watcher::Event::Apply(child("c", None)));
        assert!(names(&index, "u2").is_empty());
        index.apply(0, &watcher::Event::Apply(child("d", Some("u3"))));
        index.apply(0, &watcher::Event::Delete(child("d", Some("u3"))));
        assert_eq!(index.parents(), 0);
    }

    #[test]
    fn a_relist_replaces_what_the_kind_held() {
        let index = ChildIndex::new(1);
        index.apply(0, &watcher::Event::Apply(child("gone", Some("u1"))));
        index.apply(0, &watcher::Event::Init);
        index.apply(0, &watcher::Event::InitApply(child("kept", Some("u1"))));
        // Until the re-list ends, the old state serves.
        assert_eq!(names(&index, "u1"), ["0:gone"]);
        index.apply(0, &watcher::Event::InitDone);
        assert_eq!(names(&index, "u1"), ["0:kept"]);
    }

    #[tokio::test]
    async fn readiness_waits_for_every_kind_and_wakes_when_the_last_lists() {
        let index = Arc::new(ChildIndex::new(2));
        let kinds = ["v1/ConfigMap".to_owned(), "v1/Secret".to_owned()];
        index.apply(0, &watcher::Event::Init);
        index.apply(0, &watcher::Event::InitDone);
        assert_eq!(
            index
                .wait_ready(Duration::from_millis(50), &kinds, |_| true)
                .await,
            Err(NotReady::Timeout(Duration::from_millis(50)))
        );
        let waiter = {
            let index = index.clone();
            let kinds = kinds.clone();
            tokio::spawn(async move {
                index
                    .wait_ready(Duration::from_secs(5), &kinds, |_| true)
                    .await
            })
        };
        tokio::task::yield_now().await;
        index.apply(1, &watcher::Event::Init);
        index.apply(1, &watcher::Event::InitDone);
        assert_eq!(waiter.await.unwrap(), Ok(()));
    }

    #[tokio::test]
    async fn a_watch_that_fails_before_it_listed_is_reported_with_its_error() {
        let index = ChildIndex::new(2);
        let kinds = ["v1/ConfigMap".to_owned(), "v1/Secret".to_owned()];
        index.apply(0, &watcher::Event::Init);
        index.apply(0, &watcher::Event::InitDone);
        index.fail(1, "secrets is forbidden".into());
        let err = index
            .wait_ready(Duration::from_secs(5), &kinds, |_| true)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("v1/Secret") && err.to_string().contains("forbidden"));
        assert_eq!(index.error(1).as_deref(), Some("secrets is forbidden"));
        index.apply(1, &watcher::Event::Init);
        index.apply(1, &watcher::Event::InitDone);
        assert_eq!(index.error(1), None);
        assert_eq!(
            index
                .wait_ready(Duration::from_secs(5), &kinds, |_| true)
                .await,
            Ok(())
        );
    }

    #[tokio::test]
    async fn a_kind_not_wanted_is_not_waited_for_even_when_its_watch_fails() {
        let index = ChildIndex::new(2);
        let kinds = ["v1/ConfigMap".to_owned(), "batch/v1/Job".to_owned()];
        index.apply(0, &watcher::Event::Init);
        index.apply(0, &watcher::Event::InitDone);
        index.fail(1, "jobs.batch is forbidden".into());
        assert_eq!(
            index
                .wait_ready(Duration::from_millis(50), &kinds, |i| i == 0)
                .await,
            Ok(())
        );
        assert!(
            index
                .wait_ready(Duration::from_millis(50), &kinds, |_| true)
                .await
                .is_err()
        );
    }
}
