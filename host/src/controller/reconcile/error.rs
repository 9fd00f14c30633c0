//! Why a reconcile failed, and what each failure means for the retry, the
//! parent's Warning Event and condition, the metrics and a rollout.

use std::time::Duration;

use wasmop_contract::Reason;

use crate::controller::index::NotReady;
use crate::controller::progress::Refusal;
use crate::controller::related::RelatedTooLarge;
use crate::controller::status::WriteFailed;
use crate::runtime::CallError;
use crate::validate::Violation;

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// The guest call failed (trap, limit, or its own error).
    #[error("{0}")]
    Call(#[from] CallError),
    /// The guest's answer broke a rule; nothing was applied.
    #[error("invalid guest response, nothing applied: {0}")]
    Invalid(#[from] Violation),
    /// A desired child's name is taken by an object the parent does not
    /// control; that object was left as it is.
    #[error(
        "{kind} {name} already exists and is not this parent's child ({owner}); it was left as it is"
    )]
    ChildNameTaken {
        /// The child's kind.
        kind: String,
        /// Its name.
        name: String,
        /// Who controls the existing object.
        owner: String,
    },
    /// A desired child's name was taken when the host created it and free
    /// again when it looked; the next reconcile creates it.
    #[error("{kind} {name} was deleted while it was being created")]
    ChildVanished {
        /// The child's kind.
        kind: String,
        /// Its name.
        name: String,
    },
    /// The guest's answers keep the host writing without progress.
    #[error("{0}")]
    NoProgress(#[from] Refusal),
    /// The children cannot be known: a child watch is failing.
    #[error("{0}")]
    Watch(#[from] NotReady),
    /// The related objects would pass the guest's bounds; the guest was
    /// not called.
    #[error("{0}")]
    RelatedTooLarge(#[from] RelatedTooLarge),
    /// The API server refused a write.
    #[error("{action}: {source}")]
    Api {
        /// What the host was doing.
        action: String,
        /// The API error.
        source: kube::Error,
    },
    /// The blocking guest task did not finish.
    #[error("guest task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
}

impl ReconcileError {
    /// A trapping guest's own stack for the log, innermost first, as
    /// `f <- g <- h`; empty for any other failure.
    pub fn stack(&self) -> String {
        match self {
            Self::Call(e) => e.frames().join(" <- "),
            _ => String::new(),
        }
    }

    /// The reason for the Warning event, the condition and metrics.
    pub fn reason(&self) -> Reason {
        match self {
            Self::Call(e) => e.reason(),
            Self::Invalid(v) => v.reason(),
            Self::ChildNameTaken { .. } => Reason::ChildNameTaken,
            Self::NoProgress(Refusal::Recreated { .. }) => Reason::ChildRecreated,
            Self::NoProgress(Refusal::Flapping(_)) => Reason::ChildFlapping,
            Self::Watch(_) => Reason::WatchFailed,
            Self::RelatedTooLarge(_) => Reason::RelatedTooLarge,
            Self::Api {
                source: kube::Error::Api(status),
                ..
            } if status.code == 403 => Reason::Forbidden,
            Self::Api { .. } | Self::ChildVanished { .. } => Reason::ApplyFailed,
            Self::Join(_) => Reason::GuestTaskFailed,
        }
    }

    /// Whether the failure is the guest's answer's (a call that failed, an
    /// answer the host refused, a child it cannot have), not the host's or
    /// the API server's: what a rollout counts against a candidate.
    pub fn is_guests(&self) -> bool {
        match self {
            Self::Call(e) => !matches!(e, CallError::PoolExhausted(_)),
            Self::Invalid(_) | Self::NoProgress(_) | Self::ChildNameTaken { .. } => true,
            // The API server refused what the answer asked for (invalid,
            // forbidden, denied by a webhook); a conflict or throttling is
            // nobody's answer.
            Self::Api {
                source: kube::Error::Api(status),
                ..
            } => (400..500).contains(&status.code) && !matches!(status.code, 404 | 409 | 429),
            // What users create in the cluster, not the guest's answer.
            Self::Watch(_)
            | Self::RelatedTooLarge(_)
            | Self::Api { .. }
            | Self::ChildVanished { .. }
            | Self::Join(_) => false,
        }
    }

    /// Whether retrying may help.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Call(e) => e.is_retryable(),
            _ => true,
        }
    }

    /// Whether the failure says only that the API server is unavailable
    /// (unreachable, or answering 502/503/504), nothing about the parent:
    /// such failures retry within
    /// [`crate::controller::backoff::UNAVAILABLE_MAX_DELAY`].
    pub fn is_unavailable(&self) -> bool {
        match self {
            Self::Api { source, .. } => unavailable(source),
            _ => false,
        }
    }

    /// Turns an API error into a reconcile error saying what was being done.
    pub fn api(action: impl Into<String>) -> impl FnOnce(kube::Error) -> ReconcileError {
        let action = action.into();
        move |source| ReconcileError::Api { action, source }
    }
}

impl From<WriteFailed> for ReconcileError {
    fn from(WriteFailed { action, source }: WriteFailed) -> Self {
        Self::Api {
            action: action.to_owned(),
            source,
        }
    }
}

/// See [`ReconcileError::is_unavailable`]. A 500 is left out: a failing
/// admission webhook answers 500 too, and must back off in full.
fn unavailable(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(status) => matches!(status.code, 502..=504),
        kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_) => true,
        _ => false,
    }
}

/// A failed reconcile as the queue gets it: the failure, and when the
/// parent is tried again (decided once, by [`super::requeue`]).
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct Failure {
    /// What failed.
    pub error: ReconcileError,
    /// When to try again; `None`: not until the parent changes.
    pub retry_in: Option<Duration>,
}
