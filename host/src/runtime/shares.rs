//! Each guest's share of the instance pool.
//!
//! Every call of a guest takes one slot of the pool for as long as it runs,
//! and a call that finds none free fails (`GuestPoolExhausted`). A guest
//! runs at most [`slots_for`] calls at once: `concurrency` reconciles, as
//! many webhook calls, one shadow comparison and one load. The pool is
//! shared out among the guests that ask, max-min fair: every guest gets
//! the `concurrency` it asks while the pool holds everyone's, and when it
//! does not, each gets at most the same level, the largest that fits, so
//! that the guests asking little get what they ask and the greedy ones
//! share the rest. No guest's calls then wait for, or fail because of,
//! another's. A guest whose share holds not one reconcile at a time (more
//! guests than the pool holds) gets none, the last by name first.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// Slots a guest running `concurrency` reconciles at once may hold.
pub fn slots_for(concurrency: u16) -> u32 {
    2 * u32::from(concurrency) + 2
}

/// Why a guest gets no share at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the instance pool of {slots} slots holds no share for this guest beside the {guests} others' (each needs {needed} slots at least): raise --instance-pool"
)]
pub struct PoolFull {
    /// The pool's slots.
    pub slots: u32,
    /// The other guests with a share.
    pub guests: usize,
    /// What one reconcile at a time needs.
    pub needed: u32,
}

/// The guests' shares of a pool of `slots` (none: calls are not pooled,
/// and nothing is shared).
#[derive(Debug, Default)]
pub struct Shares {
    slots: Option<u32>,
    asks: Mutex<BTreeMap<String, u16>>,
}

impl Shares {
    /// The shares of a pool of `slots`, or of no pool.
    pub fn new(slots: Option<u32>) -> Self {
        Self {
            slots,
            asks: Mutex::default(),
        }
    }

    /// Guest `guest` asks to run `concurrency` reconciles at once.
    pub fn ask(&self, guest: &str, concurrency: u16) {
        self.asks
            .lock()
            .expect("shares lock")
            .insert(guest.to_owned(), concurrency.max(1));
    }

    /// Guest `guest` asks for nothing any more.
    pub fn forget(&self, guest: &str) {
        self.asks.lock().expect("shares lock").remove(guest);
    }

    /// The `concurrency` guest `guest` (which asked) gets of the pool beside
    /// every other guest that asks.
    pub fn grant(&self, guest: &str) -> Result<u16, PoolFull> {
        let asks = self.asks.lock().expect("shares lock");
        let asked = asks.get(guest).copied().unwrap_or(1);
        let Some(slots) = self.slots else {
            return Ok(asked);
        };
        // The guests that get a share: all while one reconcile each fits,
        // else the first by name.
        let fit = usize::try_from(slots / slots_for(1)).unwrap_or(usize::MAX);
        let sharing: Vec<u16> = asks.values().take(fit).copied().collect();
        if !asks.keys().take(fit).any(|name| name == guest) {
            return Err(PoolFull {
                slots,
                guests: fit,
                needed: slots_for(1),
            });
        }
        let used = |level: u16| -> u32 { sharing.iter().map(|c| slots_for((*c).min(level))).sum() };
        // The largest level that fits (at least 1, which fits: `fit`).
        let (mut low, mut high) = (1_u16, sharing.iter().copied().max().unwrap_or(1));
        while low < high {
            let mid = low + (high - low).div_ceil(2);
            if used(mid) <= slots {
                low = mid;
            } else {
                high = mid - 1;
            }
        }
        Ok(asked.min(low))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_greedy_guest_gets_what_the_others_leave_and_the_others_what_they_ask() {
        let shares = Shares::new(Some(64));
        shares.ask("greedy", 100);
        shares.ask("twin", 10);
        // twin: 22 slots; greedy: the 42 left, 20 reconciles at once.
        assert_eq!(shares.grant("twin"), Ok(10));
        assert_eq!(shares.grant("greedy"), Ok(20));
        assert_eq!(slots_for(10) + slots_for(20), 64);
        // Whichever asked first.
        let shares = Shares::new(Some(64));
        shares.ask("twin", 10);
        shares.ask("greedy", 100);
        assert_eq!(shares.grant("greedy"), Ok(20));
        shares.forget("twin");
        assert_eq!(shares.grant("greedy"), Ok(31));
    }

    #[test]
    fn two_greedy_guests_share_alike() {
        let shares = Shares::new(Some(256));
        shares.ask("a", 400);
        shares.ask("b", 300);
        assert_eq!(shares.grant("a"), shares.grant("b"));
        let each = shares.grant("a").unwrap();
        assert!(2 * slots_for(each) <= 256 && 2 * slots_for(each + 1) > 256);
    }

    #[test]
    fn past_one_reconcile_each_the_last_by_name_get_none() {
        let shares = Shares::new(Some(8));
        for guest in ["a", "b", "c"] {
            shares.ask(guest, 1);
        }
        assert_eq!(shares.grant("a"), Ok(1));
        assert_eq!(shares.grant("b"), Ok(1));
        assert_eq!(
            shares.grant("c"),
            Err(PoolFull {
                slots: 8,
                guests: 2,
                needed: 4
            })
        );
    }

    #[test]
    fn without_a_pool_every_guest_gets_what_it_asks() {
        let shares = Shares::new(None);
        shares.ask("a", u16::MAX);
        shares.ask("b", u16::MAX);
        assert_eq!(shares.grant("b"), Ok(u16::MAX));
    }
}
