//! A change of a child queues its controller owner.

use std::sync::Arc;

use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use kube::ResourceExt;
use kube::runtime::{WatchStreamExt, watcher};

use super::{Queueing, Watched};
use crate::controller::compact::{ParentRef, parent_ref};
use crate::controller::index::ChildIndex;
use crate::controller::watched::{scoped_api, typed_events};

/// The watch of the child kind `i` (the children `selector` selects),
/// which fills `index`; each change of a child queues its controller owner
/// as background work while that parent exists. It yields nothing: the
/// pacer admits the parents.
pub(in crate::controller) fn children(
    watched: &Watched<'_>,
    i: usize,
    selector: &str,
    index: Arc<ChildIndex>,
    queueing: Queueing,
) -> BoxStream<'static, ParentRef> {
    let kind = &watched.kinds.children[i];
    let name = kind.kind.to_string();
    let parent_namespaced = watched.kinds.primary.namespaced;
    watcher(
        scoped_api(watched.client, kind, watched.namespace),
        watched.config_selecting(kind, Some(selector)),
    )
    .map_ok(typed_events(kind.resource.clone()))
    .backoff(crate::retry::watch_backoff())
    .inspect(move |event| match event {
        Ok(event) => index.apply(i, event),
        Err(e) => {
            tracing::warn!(kind = %name, "watch of a child kind failed, retrying: {e}");
            index.fail(i, e.to_string());
        }
    })
    .touched_objects()
    .filter(|object| std::future::ready(object.is_ok()))
    .inspect_ok(move |child| {
        let primary = &queueing.primary;
        // The parent to queue: the child's controller ownerReference.
        if let Some(owner) = child.owner_references().iter().find(|o| {
            o.controller == Some(true)
                && o.kind == primary.kind
                && o.api_version == primary.api_version
        }) {
            // A cluster-scoped parent's ref has no namespace.
            let namespace = child
                .metadata
                .namespace
                .as_deref()
                .filter(|_| parent_namespaced);
            // Garbage collection of a deleted parent's children is no
            // work for the queue.
            let parent = parent_ref(primary, namespace, &owner.name);
            if queueing.parents.get(&parent).is_some() {
                queueing.added(namespace, &owner.name);
                queueing.pacer.push(parent);
            }
        }
    })
    .filter_map(|_| std::future::ready(None::<ParentRef>))
    .boxed()
}
