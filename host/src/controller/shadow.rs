//! A shadow candidate beside a reconcile: the same request, answered by
//! the candidate version on its own blocking thread, at the same time, with
//! every outbound request refused; its answer validated as if it were to
//! be applied, compared with the stable version's, and never applied.
//!
//! The reconcile does not wait for it: the comparison finishes on a task of
//! its own once both answers are there. At most the guest's `concurrency`
//! shadow calls run at once; a reconcile that finds them all busy is not
//! shadowed, so a slow or stuck candidate costs the stable version nothing
//! but that. The work on the candidate's answer (validation, comparison)
//! runs on a blocking thread too, not on the async runtime.

use std::sync::Arc;

use kube::ResourceExt;
use kube::api::DynamicObject;
use tokio::sync::oneshot;
use wasmop_contract::Reason;

use super::{Context, status};
use crate::model::{EventType, Request};
use crate::rollout::Tracker;
use crate::rollout::compare::{self, Outcome};
use crate::runtime::Guest;
use crate::sink;
use crate::telemetry::metrics::SwapLabels;
use crate::validate::{self, ParentScope, Rules, Validated};

/// Longest difference named in a `ShadowDifferent` Event.
const MAX_DIFFERENCE: usize = 600;

/// A candidate answering beside one reconcile; tell it the stable answer.
pub(super) struct Shadow {
    stable: oneshot::Sender<Result<Validated, String>>,
}

impl Shadow {
    /// Starts `candidate` on `request` at `now`, unless the guest's shadow
    /// calls are all busy.
    pub(super) fn start(
        ctx: &Arc<Context>,
        parent: &DynamicObject,
        candidate: &Guest,
        tracker: &Arc<Tracker>,
        request: Arc<Request>,
        now: u64,
    ) -> Option<Self> {
        let Ok(permit) = ctx.shadow_permits.clone().try_acquire_owned() else {
            tracing::debug!("not shadowed: every shadow call is busy");
            return None;
        };
        let (stable, stable_answer) = oneshot::channel();
        let span = tracing::info_span!("candidate", sha256 = %short(candidate.digest()));
        let call_guest = candidate.clone();
        let call = tokio::task::spawn_blocking(move || {
            span.in_scope(|| call_guest.call_reconcile_offline(&request, now))
        });
        let reference = status::reference(parent, ctx);
        let uid = parent.uid().unwrap_or_default();
        let namespace = parent.metadata.namespace.clone();
        let (ctx, candidate, tracker) = (ctx.clone(), candidate.clone(), tracker.clone());
        tokio::spawn(async move {
            let _permit = permit;
            let reply = call.await;
            // The reconcile ended before its answer was checked.
            let Ok(stable) = stable_answer.await else {
                return;
            };
            let protected = ctx.protected.clone();
            let digest = candidate.digest().to_owned();
            let judged = tokio::task::spawn_blocking(move || {
                let answer = match reply {
                    Ok(reply) => reply.result.map_err(|e| e.to_string()).and_then(|raw| {
                        validate::validate(
                            Rules {
                                description: candidate.description(),
                                bounds: candidate.limits().bounds(),
                                parent: ParentScope {
                                    namespace: namespace.as_deref(),
                                },
                                protected: &protected,
                            },
                            raw,
                        )
                        .map_err(|v| format!("invalid answer: {v}"))
                    }),
                    Err(e) => Err(format!("the call task failed: {e}")),
                };
                judge(answer, stable)
            })
            .await;
            let Ok((result, difference)) = judged else {
                return;
            };
            ctx.telemetry
                .shadow_reconciles
                .get_or_create(&SwapLabels {
                    guest: ctx.guest_name.clone(),
                    result,
                })
                .inc();
            let Some(difference) = difference else {
                return;
            };
            tracing::debug!(result, "shadow: {difference}");
            if result == "different" && tracker.first_difference(&uid) {
                ctx.events.host(
                    &reference,
                    EventType::Normal,
                    Reason::ShadowDifferent,
                    format!(
                        "candidate sha256 {}… answers differently from the running version: {difference}",
                        short(&digest)
                    ),
                    "Shadow",
                );
            }
        });
        Some(Self { stable })
    }

    /// The stable version's answer, checked (or why it failed).
    pub(super) fn stable_answered(
        self,
        answer: Result<&Validated, &super::reconcile::ReconcileError>,
    ) {
        let _ = self
            .stable
            .send(answer.cloned().map_err(ToString::to_string));
    }
}

/// The result label and the first difference of the two answers.
fn judge(
    candidate: Result<Validated, String>,
    stable: Result<Validated, String>,
) -> (&'static str, Option<String>) {
    match (candidate, stable) {
        (Err(e), _) => (
            "failed",
            Some(sink::one_line(
                &format!("the candidate failed: {e}"),
                MAX_DIFFERENCE,
            )),
        ),
        (Ok(_), Err(e)) => (
            "different",
            Some(sink::one_line(
                &format!("the stable version failed and the candidate did not: {e}"),
                MAX_DIFFERENCE,
            )),
        ),
        (Ok(candidate), Ok(stable)) => match compare::compare(&stable, &candidate) {
            Outcome::Same => ("same", None),
            Outcome::Different(first) => {
                ("different", Some(sink::one_line(&first, MAX_DIFFERENCE)))
            }
        },
    }
}

fn short(digest: &str) -> &str {
    &digest[..digest.len().min(12)]
}
