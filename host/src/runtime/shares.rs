//! Each guest's share of the instance pool.
//!
//! Every call of a guest takes one slot of the pool for as long as it runs,
//! and a call that finds none free fails (`GuestPoolExhausted`). A guest
//! runs at most [`slots_for`] calls at once: `concurrency` reconciles, as
//! many webhook calls, one shadow comparison and one load. Each guest holds
//! that many slots for itself while it runs, so no guest's calls ever wait
//! for, or fail because of, another guest's: a guest whose share does not
//! fit beside the others' gets the largest `concurrency` that does
//! ([`Shares::fit`]), and none when not even one reconcile at a time fits.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// Slots a guest running `concurrency` reconciles at once may hold.
pub fn slots_for(concurrency: u16) -> u32 {
    2 * u32::from(concurrency) + 2
}

/// Why a guest gets no share at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the instance pool has {free} of its {slots} slots free beside the other guests' shares; a guest needs {needed} at least: raise --instance-pool or lower another guest's concurrency"
)]
pub struct PoolFull {
    /// The pool's slots.
    pub slots: u32,
    /// Slots the other guests leave.
    pub free: u32,
    /// What one reconcile at a time needs.
    pub needed: u32,
}

/// The guests' shares of a pool of `slots` (none: calls are not pooled,
/// and nothing is shared).
#[derive(Debug, Default)]
pub struct Shares {
    slots: Option<u32>,
    held: Mutex<BTreeMap<String, u32>>,
}

impl Shares {
    /// The shares of a pool of `slots`, or of no pool.
    pub fn new(slots: Option<u32>) -> Self {
        Self {
            slots,
            held: Mutex::default(),
        }
    }

    /// The `concurrency` guest `guest` may run with: what it asks when its
    /// share fits beside the others' (its own current share counts as
    /// free), else the most that fits. Nothing is held until [`Self::hold`].
    pub fn fit(&self, guest: &str, concurrency: u16) -> Result<u16, PoolFull> {
        let Some(slots) = self.slots else {
            return Ok(concurrency);
        };
        let held = self.held.lock().expect("shares lock");
        let others: u32 = held
            .iter()
            .filter(|(name, _)| *name != guest)
            .map(|(_, n)| n)
            .sum();
        let free = slots.saturating_sub(others);
        if slots_for(concurrency) <= free {
            return Ok(concurrency);
        }
        let most = (free.saturating_sub(2) / 2).min(u32::from(concurrency));
        match u16::try_from(most) {
            Ok(most) if most >= 1 => Ok(most),
            _ => Err(PoolFull {
                slots,
                free,
                needed: slots_for(1),
            }),
        }
    }

    /// Holds the share of `guest` running `concurrency` reconciles at once
    /// (in place of the one it held).
    pub fn hold(&self, guest: &str, concurrency: u16) {
        self.held
            .lock()
            .expect("shares lock")
            .insert(guest.to_owned(), slots_for(concurrency));
    }

    /// Gives back the share of `guest`.
    pub fn release(&self, guest: &str) {
        self.held.lock().expect("shares lock").remove(guest);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guest_asking_more_than_is_left_gets_what_fits_and_the_others_keep_theirs() {
        let shares = Shares::new(Some(256));
        assert_eq!(shares.fit("quiet", 10), Ok(10));
        shares.hold("quiet", 10);
        // 256 - 22 = 234 slots left: 116 reconciles at once.
        assert_eq!(shares.fit("greedy", 400), Ok(116));
        shares.hold("greedy", 116);
        assert_eq!(slots_for(10) + slots_for(116), 256);
        // A guest asking again for its own share counts it as free.
        assert_eq!(shares.fit("greedy", 116), Ok(116));
        assert_eq!(shares.fit("quiet", 10), Ok(10));
        // Nothing left for a third.
        assert_eq!(
            shares.fit("late", 1),
            Err(PoolFull {
                slots: 256,
                free: 0,
                needed: 4
            })
        );
        shares.release("greedy");
        assert_eq!(shares.fit("late", 1), Ok(1));
    }

    #[test]
    fn without_a_pool_every_guest_gets_what_it_asks() {
        let shares = Shares::new(None);
        shares.hold("a", u16::MAX);
        assert_eq!(shares.fit("b", u16::MAX), Ok(u16::MAX));
    }
}
