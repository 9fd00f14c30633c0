//! The swappable holder of a guest's module versions: the stable one, and
//! during a rollout the candidate beside it.
//!
//! Each reconcile asks the slot which version serves its parent
//! ([`GuestSlot::assign`]) and uses that version to the end; a swap,
//! promotion or rollback replaces the slot's content, so reconciles already
//! running finish on the version they started with while new ones use the
//! new arrangement. A version is dropped with its last user. Webhooks and
//! everything else that is not a reconcile use the stable version
//! ([`GuestSlot::current`]).

use std::sync::{Arc, RwLock};

use super::side;
use super::tracker::Tracker;
use crate::runtime::Guest;

/// How the candidate serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// It answers every request beside the stable version; nothing of it
    /// is applied.
    Shadow,
    /// It serves the parents at or below `cut` ([`side`]).
    Canary {
        /// The highest position on the candidate.
        cut: u64,
    },
    /// It serves nobody yet: a canary waits for its first step.
    Waiting,
}

/// A candidate version, how it serves, and what is seen of it.
#[derive(Clone)]
pub struct Candidate {
    /// The loaded version.
    pub guest: Guest,
    /// How it serves.
    pub mode: Mode,
    /// Its failures and the readiness of the parents it serves.
    pub tracker: Arc<Tracker>,
}

impl std::fmt::Debug for Candidate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Candidate")
            .field("digest", &self.guest.digest())
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

/// Which version reconciles one parent.
pub enum Assignment {
    /// The stable version, alone.
    Stable(Guest),
    /// The stable version, applied, with the candidate answering the same
    /// request beside it.
    Shadowed {
        /// Applied.
        stable: Guest,
        /// Compared, never applied.
        candidate: Guest,
        /// Where the comparison is recorded.
        tracker: Arc<Tracker>,
    },
    /// The candidate, applied.
    Candidate {
        /// The candidate.
        guest: Guest,
        /// Where its outcome is recorded.
        tracker: Arc<Tracker>,
    },
}

impl Assignment {
    /// The version whose answer is applied.
    pub fn applied(&self) -> &Guest {
        match self {
            Self::Stable(guest) | Self::Candidate { guest, .. } => guest,
            Self::Shadowed { stable, .. } => stable,
        }
    }
}

#[derive(Debug)]
struct Versions {
    stable: Guest,
    candidate: Option<Candidate>,
}

/// A shared, atomically replaceable set of a guest's versions.
#[derive(Clone, Debug)]
pub struct GuestSlot(Arc<RwLock<Versions>>);

impl GuestSlot {
    /// A slot holding `guest` as the stable version.
    pub fn new(guest: Guest) -> Self {
        Self(Arc::new(RwLock::new(Versions {
            stable: guest,
            candidate: None,
        })))
    }

    /// The stable version: what webhooks use, and what reconciles use
    /// when no rollout runs.
    pub fn current(&self) -> Guest {
        self.0.read().expect("guest slot lock").stable.clone()
    }

    /// The candidate, while a rollout runs.
    pub fn candidate(&self) -> Option<Candidate> {
        self.0.read().expect("guest slot lock").candidate.clone()
    }

    /// The version that reconciles the parent with `uid`.
    pub fn assign(&self, uid: &str) -> Assignment {
        let versions = self.0.read().expect("guest slot lock");
        let stable = versions.stable.clone();
        let Some(candidate) = &versions.candidate else {
            return Assignment::Stable(stable);
        };
        match candidate.mode {
            Mode::Shadow => Assignment::Shadowed {
                stable,
                candidate: candidate.guest.clone(),
                tracker: candidate.tracker.clone(),
            },
            Mode::Canary { cut } if side::on_candidate(side::position(uid), Some(cut)) => {
                Assignment::Candidate {
                    guest: candidate.guest.clone(),
                    tracker: candidate.tracker.clone(),
                }
            }
            Mode::Canary { .. } | Mode::Waiting => Assignment::Stable(stable),
        }
    }

    /// Installs `guest` as the stable version for every reconcile that
    /// starts from now on; the candidate, if any, stays.
    pub fn swap(&self, guest: Guest) -> Guest {
        std::mem::replace(&mut self.0.write().expect("guest slot lock").stable, guest)
    }

    /// Sets (or drops) the candidate; returns the one it replaced.
    pub fn set_candidate(&self, candidate: Option<Candidate>) -> Option<Candidate> {
        std::mem::replace(
            &mut self.0.write().expect("guest slot lock").candidate,
            candidate,
        )
    }

    /// Changes how the candidate serves, if there is one.
    pub fn set_mode(&self, mode: Mode) {
        if let Some(candidate) = &mut self.0.write().expect("guest slot lock").candidate {
            candidate.mode = mode;
        }
    }

    /// Makes the candidate the stable version; returns the stable version
    /// it replaced. Without a candidate nothing changes.
    pub fn promote(&self) -> Option<Guest> {
        let mut versions = self.0.write().expect("guest slot lock");
        let candidate = versions.candidate.take()?;
        Some(std::mem::replace(&mut versions.stable, candidate.guest))
    }
}
