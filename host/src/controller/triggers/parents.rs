//! The parents' own changes: the watch that fills the parents' store.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures::{Stream, TryStreamExt};
use kube::ResourceExt;
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{WatchStreamExt, watcher};

use super::{Queueing, Watched};
use crate::controller::compact::{self, Compact, ParentRef};
use crate::controller::last_writes::LastWrites;
use crate::controller::related::RelatedIndex;
use crate::controller::watched::{map_object, scoped_api, typed_events};

/// The watch of the parents in the scope, reflected into `store`: `listed`
/// is set at its first complete list, `related` learns what each parent
/// points at, and the host's own writes (`last_writes`) are told apart.
/// A parent whose spec changed is queued: at once when a user changed it,
/// as background work through the pacer when it is seen for the first
/// time (listed or created) or the version is the host's own write (its
/// finalizer). Only the former are yielded; the pacer admits the rest.
pub(in crate::controller) fn parents(
    watched: &Watched<'_>,
    store: reflector::store::Writer<Compact>,
    listed: Arc<AtomicBool>,
    related: Arc<RelatedIndex>,
    last_writes: &Arc<LastWrites>,
    queueing: Queueing,
) -> impl Stream<Item = Result<Compact, watcher::Error>> + Send + 'static {
    let marked_kind = watched.kinds.primary.resource.clone();
    let parent_kind = watched.kinds.primary.kind.to_string();
    // Parent events that are background work, marked before the store
    // learns them.
    let background: Arc<Mutex<HashSet<ParentRef>>> = Arc::default();
    let (seen_before, mark) = (store.as_reader(), background.clone());
    let (own_writes, seen_writes) = (last_writes.clone(), last_writes.clone());
    watcher(
        scoped_api(watched.client, &watched.kinds.primary, watched.namespace),
        watched.config(&watched.kinds.primary),
    )
    .map_ok(typed_events(marked_kind.clone()))
    .backoff(crate::retry::watch_backoff())
    .inspect_ok(move |event| match event {
        watcher::Event::InitDone => listed.store(true, Ordering::Release),
        watcher::Event::Apply(parent) | watcher::Event::InitApply(parent) => {
            related.parent_applied(parent);
            let key = compact::key_of(parent, &marked_kind);
            let initial = matches!(event, watcher::Event::InitApply(_));
            let mut marks = mark.lock().expect("background lock");
            if initial || seen_before.get(&key).is_none() || own_writes.is_own(&parent.metadata) {
                marks.insert(key);
            } else {
                // A mark the spec predicate left (a re-list of an unchanged
                // parent) does not make its next change background work.
                marks.remove(&key);
            }
        }
        watcher::Event::Delete(parent) => {
            related.parent_deleted(parent);
            let key = compact::key_of(parent, &marked_kind);
            mark.lock().expect("background lock").remove(&key);
        }
        watcher::Event::Init => {}
    })
    .inspect_err(
        move |e| tracing::warn!(kind = %parent_kind, "watch of the parents failed, retrying: {e}"),
    )
    .map_ok(|event| map_object(event, Compact::from))
    .reflect(store)
    .inspect_ok(move |event| {
        // The store holds this version now.
        if let watcher::Event::Apply(parent) | watcher::Event::InitApply(parent) = event {
            seen_writes.seen(&parent.metadata);
        }
    })
    .applied_objects()
    .predicate_filter(
        |parent: &Compact| Some(parent.spec_hash()),
        Default::default(),
    )
    .try_filter(move |parent| {
        queueing.added(parent.metadata.namespace.as_deref(), &parent.name_any());
        let key = ObjectRef::from_obj_with(parent, queueing.primary.clone());
        let paced = background.lock().expect("background lock").remove(&key);
        if paced {
            queueing.pacer.push(key);
        } else {
            queueing.pacer.urgent(key);
        }
        std::future::ready(!paced)
    })
}
