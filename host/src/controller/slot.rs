//! The swappable holder of a guest's current module version.
//!
//! Each reconcile clones the current [`Guest`] (an `Arc`) at its start and
//! uses it to the end; a swap replaces the slot's content, so reconciles
//! already running finish on the old version while new ones use the new
//! one. The old version is dropped with its last user.

use std::sync::{Arc, RwLock};

use crate::runtime::Guest;

/// A shared, atomically replaceable [`Guest`].
#[derive(Clone, Debug)]
pub struct GuestSlot(Arc<RwLock<Guest>>);

impl GuestSlot {
    /// A slot holding `guest`.
    pub fn new(guest: Guest) -> Self {
        Self(Arc::new(RwLock::new(guest)))
    }

    /// The version new reconciles should use.
    pub fn current(&self) -> Guest {
        self.0.read().expect("guest slot lock").clone()
    }

    /// Installs `guest` for every reconcile that starts from now on.
    pub fn swap(&self, guest: Guest) -> Guest {
        std::mem::replace(&mut *self.0.write().expect("guest slot lock"), guest)
    }
}
