//! Requeue: what the queue does with the parent once its reconcile ended,
//! decided here and nowhere else. A success waits for the next change, or
//! comes back when the guest asked (`requeueAfterSeconds`) or a contested
//! child may be corrected again; a failure comes back after the parent's
//! exponential backoff (capped while the API server is merely unavailable)
//! or, when retrying cannot help, waits for a change.

use std::time::Duration;

use kube::api::DynamicObject;
use kube::runtime::controller::Action;

use super::execute::{self, Executed};
use super::{Failure, ReconcileError};
use crate::controller::backoff;
use crate::controller::compact::ParentRef;
use crate::controller::context::Context;
use crate::sink;
use crate::telemetry::metrics::{ControllerLabels, ResultLabels};
use crate::validate::Validated;

/// When a reconciled parent comes back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    /// Not until it changes.
    Done,
    /// After this delay.
    After(Duration),
}

/// When a parent whose reconcile wrote what `answer` asks comes back.
/// How soon a parent whose guest reads back the status it was given comes
/// back ([`Executed::status_to_see`]).
const STATUS_TO_SEE: Duration = Duration::from_millis(100);

pub(super) fn after(answer: &Validated, executed: &Executed) -> Outcome {
    if executed.finalized {
        return Outcome::Done;
    }
    if executed.status_to_see {
        return Outcome::After(STATUS_TO_SEE);
    }
    let asked = answer
        .requeue_after_seconds
        .map(|s| Duration::from_secs(u64::from(s.max(1))));
    match (asked, executed.contested_retry) {
        (Some(a), Some(b)) => Outcome::After(a.min(b)),
        (Some(d), None) | (None, Some(d)) => Outcome::After(d),
        (None, None) => Outcome::Done,
    }
}

/// Counts the reconcile of `parent` (queued as `key`, `queue_key`) that
/// ended with `result`, records a failure on the parent, and decides when
/// it comes back.
pub(super) async fn decide(
    parent: &DynamicObject,
    ctx: &Context,
    key: &ParentRef,
    queue_key: String,
    result: Result<Outcome, ReconcileError>,
) -> Result<Action, Failure> {
    let tele = &ctx.telemetry;
    let result_label = |result: &'static str| ResultLabels {
        controller: ctx.guest_name.clone(),
        result,
    };
    match result {
        Ok(outcome) => {
            ctx.backoff.succeed(key);
            ctx.metrics.record_success();
            let (label, action) = match outcome {
                Outcome::After(delay) => {
                    ctx.queue.add(queue_key, delay);
                    ("requeue_after", Action::requeue(delay))
                }
                Outcome::Done => ("success", Action::await_change()),
            };
            tele.reconcile_total
                .get_or_create(&result_label(label))
                .inc();
            Ok(action)
        }
        Err(error) => {
            let labels = ControllerLabels {
                controller: ctx.guest_name.clone(),
            };
            ctx.metrics.record_failure();
            tele.reconcile_total
                .get_or_create(&result_label("error"))
                .inc();
            tele.reconcile_errors.get_or_create(&labels).inc();
            tele.guest_failed(&ctx.guest_name, error.reason());
            let retry_in = if error.is_retryable() {
                let delay = retry_delay(&error, ctx.backoff.fail(key));
                tele.queue_retries.get_or_create(ctx.queue.labels()).inc();
                ctx.queue.add(queue_key, delay);
                tracing::warn!(reason = %error.reason(), retry_in = ?delay, guest_stack = %error.stack(), "reconcile failed: {}", sink::cut(&error.to_string(), sink::LOG_MESSAGE_BYTES));
                Some(delay.max(Duration::from_millis(1)))
            } else {
                tele.terminal_errors.get_or_create(&labels).inc();
                tracing::warn!(reason = %error.reason(), guest_stack = %error.stack(), "reconcile failed permanently, waiting for a change: {}", sink::cut(&error.to_string(), sink::LOG_MESSAGE_BYTES));
                None
            };
            execute::report_failure(parent, ctx, &error).await;
            Err(Failure { error, retry_in })
        }
    }
}

/// The backoff's `delay`, capped for a failure that says only that the API
/// server is unavailable: the parent's failures during an outage say
/// nothing about it, and it must not wait minutes once the server is back.
fn retry_delay(error: &ReconcileError, delay: Duration) -> Duration {
    if error.is_unavailable() {
        delay.min(backoff::UNAVAILABLE_MAX_DELAY)
    } else {
        delay
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(requeue_after_seconds: Option<u32>) -> Validated {
        Validated {
            children: Vec::new(),
            status: None,
            requeue_after_seconds,
            finalized: false,
            events: Vec::new(),
            keep: Vec::new(),
        }
    }

    fn executed(finalized: bool, contested_retry: Option<u64>) -> Executed {
        Executed {
            finalized,
            contested_retry: contested_retry.map(Duration::from_secs),
            status_to_see: false,
        }
    }

    #[test]
    fn a_success_comes_back_at_the_soonest_of_what_the_guest_and_a_contested_child_ask() {
        let secs = |s| Outcome::After(Duration::from_secs(s));
        let cases = [
            (None, None, false, Outcome::Done),
            (Some(30), None, false, secs(30)),
            (None, Some(5), false, secs(5)),
            (Some(30), Some(5), false, secs(5)),
            (Some(2), Some(5), false, secs(2)),
            // Zero seconds is read as one: a guest cannot spin the queue.
            (Some(0), None, false, secs(1)),
            // A finalized parent is gone: nothing brings it back.
            (Some(30), Some(5), true, Outcome::Done),
        ];
        for (asked, contested, finalized, want) in cases {
            assert_eq!(
                after(&answer(asked), &executed(finalized, contested)),
                want,
                "asked {asked:?}, contested {contested:?}, finalized {finalized}"
            );
        }
    }
}
