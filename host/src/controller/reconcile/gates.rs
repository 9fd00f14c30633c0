//! The gates a parent passes before its reconcile runs: this replica leads
//! the parent's unit of work, the parent belongs to this scope's shard, and
//! one of the guest's reconcile permits is free.

use kube::ResourceExt;
use kube::runtime::controller::Action;
use tokio::sync::OwnedSemaphorePermit;

use crate::controller::compact::Compact;
use crate::controller::context::Context;
use crate::controller::shards::SHARD_LABEL;
use crate::leader::Work;

/// When a scope tries again to move a parent to its shard after its
/// attempts failed.
const RELABEL_RETRY: std::time::Duration = std::time::Duration::from_secs(10);

/// What a reconcile holds while it runs, once past the gates.
pub(super) struct Passed {
    /// Counts the reconcile as work of the lease: a lease handed back waits
    /// for it.
    _work: Work,
    /// One of the guest's `concurrency` permits, across its scopes.
    _permit: OwnedSemaphorePermit,
}

/// Lets the reconcile of `parent` (queued as `queue_key`) run, or tells the
/// queue what to do instead.
pub(super) async fn pass(
    parent: &Compact,
    ctx: &Context,
    queue_key: &str,
) -> Result<Passed, Action> {
    // Counted before the check: a lease handed back waits for this
    // reconcile to finish, or it sees the lease going and does not start.
    let work = ctx.leadership.work();
    // A standby keeps its caches warm but does not reconcile; the leader it
    // becomes reconciles every parent.
    if !ctx.leadership.may_start() {
        ctx.queue.forget(queue_key);
        return Err(Action::await_change());
    }
    // Labelled with this shard but hashed to another (a user's edit, a
    // label of another count): moved there, never reconciled here.
    let (namespace, name) = (parent.metadata.namespace.as_deref(), parent.name_any());
    if ctx.shard.is_some_and(|s| !s.owns(namespace, &name)) {
        let moved = match (&ctx.relabeller, parent.metadata.uid.as_deref()) {
            (Some(relabeller), Some(uid)) => {
                let have = parent.labels().get(SHARD_LABEL).map(String::as_str);
                relabeller.relabel(namespace, &name, uid, have).await
            }
            _ => true,
        };
        if !moved {
            return Err(Action::requeue(RELABEL_RETRY));
        }
        ctx.queue.forget(queue_key);
        return Err(Action::await_change());
    }
    let Ok(permit) = ctx.permits.clone().acquire_owned().await else {
        return Err(Action::await_change());
    };
    Ok(Passed {
        _work: work,
        _permit: permit,
    })
}
