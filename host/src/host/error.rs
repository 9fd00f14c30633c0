//! Why a guest could not be (re)loaded; the running version, if any, keeps
//! serving.

use wasmop_contract::Reason;

use super::spec::Origin;
use crate::controller::discovery;
use crate::rollout::candidacy::KindsChanged;

/// Why a guest could not be (re)loaded. The running version, if any, keeps
/// serving.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Compile, link or describe failed.
    #[error(transparent)]
    Load(#[from] crate::runtime::Error),
    /// The kinds it declares cannot be served.
    #[error(transparent)]
    Discovery(Box<discovery::Error>),
    /// Another guest already manages the same primary kind.
    #[error("primary kind {kind} is already managed by guest {other:?}")]
    KindTaken {
        /// The kind.
        kind: String,
        /// The guest managing it.
        other: String,
    },
    /// The name belongs to a guest from another source.
    #[error("guest {name:?} is already given by {other}; this one is ignored")]
    NameTaken {
        /// The guest.
        name: String,
        /// Where the running one comes from.
        other: Origin,
    },
    /// A client for the guest could not be built.
    #[error("cannot build a client for the guest: {0}")]
    Client(#[source] kube::Error),
    /// The blocking load task failed.
    #[error("load task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
    /// A candidate of a rollout reconciles another primary kind, or
    /// declares another finalizer, than the stable version.
    #[error(transparent)]
    RolloutKindsChanged(#[from] KindsChanged),
    /// A progressive rollout of a module listed where the stable version
    /// came from: a restarted host could not fetch the stable one again.
    #[error(
        "the new module is listed at the stable version's own source ({location}): a rollout needs the stable module to stay where it is, so that a restarted host or a standby can load it again; list the new module under another ConfigMap name or key, file, URL or tag, or use rollout strategy Immediate"
    )]
    StableNotPinned {
        /// The source both are listed at.
        location: String,
    },
    /// The guest converts a kind whose CRD converts with a webhook, and
    /// this host serves no webhooks.
    #[error(
        "guest {guest:?} converts {kind}, whose CustomResourceDefinition names a conversion webhook, and this host serves no webhooks: pass --webhook-host <the address the API server reaches this host at> (127.0.0.1 and --webhook-bind-address 127.0.0.1:0 against a local control plane)"
    )]
    WebhookNeeded {
        /// The guest.
        guest: String,
        /// Its primary kind.
        kind: String,
    },
    /// Another list's guest claims the primary kind where this one would
    /// watch, or the claim could not be read or written.
    #[error(transparent)]
    Claim(#[from] crate::claims::Error),
    /// The guest's share of the instance pool does not fit beside the
    /// other guests'.
    #[error(transparent)]
    PoolFull(#[from] crate::runtime::shares::PoolFull),
    /// The stable version of a rollout to resume cannot be fetched again.
    #[error(
        "the rollout's stable module sha256 {digest} cannot be fetched again ({why}): the guest starts once it can, or once its entry's rollout strategy is Immediate"
    )]
    StableUnavailable {
        /// The stable module's digest.
        digest: String,
        /// Why it cannot be fetched.
        why: String,
    },
}

impl From<discovery::Error> for Error {
    fn from(e: discovery::Error) -> Self {
        Self::Discovery(Box::new(e))
    }
}

impl Error {
    /// The Event reason for this failure.
    pub fn reason(&self) -> Reason {
        use crate::runtime::Error as Runtime;
        match self {
            Self::Load(Runtime::Compile(_) | Runtime::WrongWorld(_)) => Reason::InvalidModule,
            Self::Load(Runtime::Describe(_)) => Reason::DescribeFailed,
            Self::Load(Runtime::InvalidSettings(_)) => Reason::InvalidSettings,
            Self::Load(Runtime::InvalidDescription(_)) => Reason::InvalidDescription,
            Self::Load(_)
            | Self::Join(_)
            | Self::Client(_)
            | Self::NameTaken { .. }
            | Self::WebhookNeeded { .. } => Reason::GuestLoadFailed,
            Self::Discovery(e) if matches!(**e, discovery::Error::NotWatchable { .. }) => {
                Reason::Forbidden
            }
            Self::Discovery(_) => Reason::KindsNotServed,
            Self::KindTaken { .. } | Self::Claim(crate::claims::Error::Taken { .. }) => {
                Reason::KindTaken
            }
            Self::Claim(
                crate::claims::Error::Api { .. } | crate::claims::Error::Contended { .. },
            ) => Reason::GuestLoadFailed,
            Self::RolloutKindsChanged(_) => Reason::RolloutKindsChanged,
            Self::PoolFull(_) => Reason::GuestPoolShare,
            Self::StableUnavailable { .. } | Self::StableNotPinned { .. } => {
                Reason::RolloutStableUnavailable
            }
        }
    }
}
