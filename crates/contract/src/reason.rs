//! Every reason the host records in Events, conditions and metric labels.

macro_rules! reasons {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        /// The reasons of the host's Events and of its `GuestReconciled`
        /// condition; also the `reason` label of failure metrics, so their
        /// number is bounded. Each reads as its variant name (CamelCase).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Reason {
            $($(#[$doc])* $name,)*
        }

        impl Reason {
            /// Every reason, in declaration order.
            pub const ALL: &'static [Reason] = &[$(Reason::$name,)*];

            /// The reason as Kubernetes shows it.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Reason::$name => stringify!($name),)*
                }
            }
        }
    };
}

reasons! {
    // A reconcile that failed on the host's side.
    /// The guest ran past its deadline.
    GuestTimeout,
    /// The guest tried to grow its memory past its cap.
    GuestMemoryLimit,
    /// The guest trapped (panic, unreachable, stack overflow).
    GuestTrap,
    /// The guest's answer was larger than its limit.
    GuestResponseTooLarge,
    /// No instance slot was free.
    GuestPoolExhausted,
    /// The guest returned a retryable error.
    ReconcileFailed,
    /// The guest returned a permanent error.
    ReconcileFailedPermanently,
    /// The guest's answer broke a rule; nothing was applied.
    InvalidGuestResponse,
    /// A desired child's name is taken by an object the parent does not
    /// control; nothing about that object changed.
    ChildNameTaken,
    /// A desired child is one of the host's own objects.
    ProtectedObject,
    /// The guest asked again for a child the host pruned for it at the same
    /// generation of the parent.
    ChildRecreated,
    /// The guest's wish for a child went back to an earlier one while nobody
    /// else changed the child.
    ChildFlapping,
    /// Another writer keeps changing a child the guest sets; the host waits
    /// longer and longer between its corrections.
    ChildContested,
    /// The API server refused a write.
    ApplyFailed,
    /// The API server refused a request as not permitted (403): the
    /// identity the guest's requests carry (its ServiceAccount under
    /// `--guest-identity impersonate`) lacks that verb on that resource.
    Forbidden,
    /// A watch of a child kind failed (RBAC, a kind gone), so the host
    /// cannot see the parent's children.
    WatchFailed,
    /// The guest call task failed.
    GuestTaskFailed,
    /// The related objects of a parent pass the guest's bounds
    /// (`maxRelatedObjects`, `maxRelatedBytes`); the guest was not called.
    RelatedTooLarge,
    /// The host refused an outbound HTTP request of the guest (a host not
    /// in its `allowedOutboundHosts`, or a non-public address).
    OutboundRefused,
    /// The controller is stopping.
    ControllerStopping,
    /// The reconcile succeeded again after a failure.
    Reconciled,

    // The guest list and module versions.
    /// Not a component of the WIT world.
    InvalidModule,
    /// `describe` trapped or failed.
    DescribeFailed,
    /// `describe` returned a description the host refuses.
    InvalidDescription,
    /// `describe` refused the guest's settings.
    InvalidSettings,
    /// The module's bytes do not match the pinned digest.
    DigestMismatch,
    /// The module could not be fetched.
    ModuleFetchFailed,
    /// The module carries no valid signature by a key the host trusts for
    /// it (no signature, another key, a signature of another digest or
    /// repository, an unreadable one).
    SignatureInvalid,
    /// A declared kind is not served, or not served by a CRD.
    KindsNotServed,
    /// Another guest manages the primary kind.
    KindTaken,
    /// The guest list cannot be read.
    InvalidGuestList,
    /// Loading failed for another reason.
    GuestLoadFailed,
    /// The guest's `concurrency` did not fit in its share of the instance
    /// pool beside the other guests': it runs with less, or not at all.
    GuestPoolShare,
    /// A guest started.
    GuestStarted,
    /// A guest's module version was swapped.
    GuestSwapped,
    /// A guest was removed from the list and stopped.
    GuestStopped,
    /// The guest list names the running version again after a refused
    /// update: nothing changes, and the refusal is over.
    GuestRestored,

    // Rollouts of a new module version.
    /// A candidate version started to roll out beside the stable one.
    RolloutStarted,
    /// The candidate passed every step and is the stable version now.
    RolloutPromoted,
    /// A step failed: every parent went back to the stable version.
    RolloutAborted,
    /// The guest list names the stable version again: the candidate is gone.
    RolloutCancelled,
    /// The candidate reconciles another primary kind, or declares another
    /// finalizer, than the stable version: only an `Immediate` change may
    /// do that.
    RolloutKindsChanged,
    /// The stable version a rollout resumes from cannot be fetched again.
    RolloutStableUnavailable,
    /// The candidate's answer for a parent differs from the stable
    /// version's (shadow).
    ShadowDifferent,
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_reads_as_its_name_and_is_camel_case() {
        assert_eq!(Reason::ChildNameTaken.as_str(), "ChildNameTaken");
        for reason in Reason::ALL {
            let text = reason.as_str();
            assert!(text.starts_with(|c: char| c.is_ascii_uppercase()), "{text}");
            assert!(text.chars().all(|c| c.is_ascii_alphanumeric()), "{text}");
        }
    }
}
