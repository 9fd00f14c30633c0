//! A change of a related object queues the parents that point at it.

use std::sync::Arc;

use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use kube::Client;
use kube::api::{Api, DynamicObject};
use kube::runtime::{WatchStreamExt, watcher};

use super::{Queueing, Watched};
use crate::controller::compact::{ParentRef, parent_ref};
use crate::controller::discovery::ResolvedKind;
use crate::controller::related::RelatedIndex;
use crate::controller::watched::{map_object, scoped_api, typed_events};

/// The parents a change of an object a Metacontroller customize hook
/// selected concerns, received on `woken` (`controller/customized.rs`):
/// queued at once, as a related object's.
pub(in crate::controller) fn customized(
    woken: tokio::sync::mpsc::UnboundedReceiver<ParentRef>,
    queueing: Queueing,
) -> BoxStream<'static, ParentRef> {
    futures::stream::unfold(woken, |mut rx| async move {
        rx.recv().await.map(|key| (key, rx))
    })
    .inspect(move |key| queueing.added(key.namespace.as_deref(), &key.name))
    .boxed()
}

/// The watch of the related kind `i`, which fills `index` (Secrets
/// concealed first where `conceal`); each change queues, at once, the
/// parents whose names or selectors point at the object. Nothing in
/// `host_namespace` is watched.
pub(in crate::controller) fn related(
    watched: &Watched<'_>,
    i: usize,
    host_namespace: Option<&str>,
    index: Arc<RelatedIndex>,
    conceal: bool,
    queueing: Queueing,
) -> BoxStream<'static, ParentRef> {
    let (kind, declared) = &watched.kinds.related[i];
    let name = kind.kind.to_string();
    related_events(
        watched.client,
        kind,
        watched.namespace,
        declared.metadata_only,
        host_namespace,
    )
    .map_ok(typed_events(kind.resource.clone()))
    .map_ok(move |event| {
        if conceal {
            event.modify(crate::secrets::conceal_object)
        } else {
            event
        }
    })
    .backoff(crate::retry::watch_backoff())
    .filter_map(move |event| {
        let parents = match event {
            Ok(event) => index.apply(i, event),
            Err(e) => {
                tracing::warn!(kind = %name, "watch of a related kind failed, retrying: {e}");
                index.fail(i, e.to_string());
                Vec::new()
            }
        };
        std::future::ready(Some(futures::stream::iter(parents)))
    })
    .flatten()
    .map(move |(namespace, name)| {
        queueing.added(namespace.as_deref(), &name);
        parent_ref(&queueing.primary, namespace.as_deref(), &name)
    })
    .boxed()
}

/// A related kind's watch events: whole objects, or only their metadata
/// (as objects with no data).
fn related_events(
    client: &Client,
    kind: &ResolvedKind,
    namespace: Option<&str>,
    metadata_only: bool,
    host_namespace: Option<&str>,
) -> BoxStream<'static, Result<watcher::Event<DynamicObject>, watcher::Error>> {
    // Nothing in the host's own namespace (its pull and certificate
    // Secrets, its guest list) is ever related: the API server leaves it
    // out of the list and the watch.
    let config = match host_namespace {
        Some(host) => watcher::Config::default().fields(&format!("metadata.namespace!={host}")),
        None => watcher::Config::default(),
    };
    if !metadata_only {
        let api: Api<DynamicObject> = scoped_api(client, kind, namespace);
        return watcher(api, config).boxed();
    }
    let api: Api<kube::core::PartialObjectMeta<DynamicObject>> =
        scoped_api(client, kind, namespace);
    let types = kube::core::TypeMeta {
        api_version: kind.resource.api_version.clone(),
        kind: kind.resource.kind.clone(),
    };
    let whole = move |meta: kube::core::PartialObjectMeta<DynamicObject>| DynamicObject {
        types: Some(types.clone()),
        metadata: meta.metadata,
        data: serde_json::json!({}),
    };
    watcher(api, config)
        .map_ok(move |event| map_object(event, &whole))
        .boxed()
}
