//! A guest's parents split into shards (the guest-list entry's `shards`).
//!
//! A parent's shard is a stable hash of its namespace and name modulo the
//! shard count. The host keeps it in the parent's [`SHARD_LABEL`] (the
//! labeller, [`super::labeller`]) and stamps it on every child it applies
//! for that parent, so each shard's scope watches, with a label selector,
//! only its own parents and children: its caches hold its share, not the
//! whole guest. A scope reconciles only the parents whose hash is its
//! shard.

pub use crate::settings::MAX_SHARDS;
pub use wasmop_contract::names::SHARD_LABEL;

/// The duty the labeller's requests name in their user agent
/// (`… guest/<guest> shard-labeller`).
pub const LABELLER: &str = "shard-labeller";

/// One shard of a guest: `index` of `count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// This shard, `0..count`.
    pub index: u16,
    /// The guest's shard count (at least 2: a guest of one shard is not
    /// sharded).
    pub count: u16,
}

impl Shard {
    /// The shards of a guest with `count` of them, or one unsharded scope
    /// (`None`) when `count` is 1.
    pub fn all(count: u16) -> Vec<Option<Shard>> {
        if count <= 1 {
            return vec![None];
        }
        (0..count)
            .map(|index| Some(Shard { index, count }))
            .collect()
    }

    /// The shard of the parent `namespace/name` among `count`: FNV-1a
    /// (64 bit) of `namespace/name`, modulo `count`.
    pub fn of(namespace: Option<&str>, name: &str, count: u16) -> u16 {
        const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
        const PRIME: u64 = 0x0000_0100_0000_01b3;
        let key = format!("{}/{name}", namespace.unwrap_or_default());
        let hash = key
            .bytes()
            .fold(OFFSET, |h, b| (h ^ u64::from(b)).wrapping_mul(PRIME));
        u16::try_from(hash % u64::from(count.max(1))).expect("below a u16 count")
    }

    /// Whether the parent `namespace/name` is this shard's.
    pub fn owns(&self, namespace: Option<&str>, name: &str) -> bool {
        Self::of(namespace, name, self.count) == self.index
    }

    /// The label selector of this shard's objects.
    pub fn selector(&self) -> String {
        format!("{SHARD_LABEL}={}", self.index)
    }

    /// The label selector of the objects labelled with no shard of
    /// `count`: without the label, or with one outside `0..count`.
    pub fn unassigned(count: u16) -> String {
        let shards: Vec<String> = (0..count).map(|k| k.to_string()).collect();
        format!("{SHARD_LABEL} notin ({})", shards.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parents_shard_is_stable_and_within_the_count() {
        for count in [2, 3, 5, MAX_SHARDS] {
            for i in 0..200 {
                let name = format!("cache-{i}");
                let shard = Shard::of(Some("team-a"), &name, count);
                assert!(shard < count);
                assert_eq!(shard, Shard::of(Some("team-a"), &name, count));
            }
        }
        // FNV-1a of "/a" (64 bit), a fixed point of the contract.
        assert_eq!(
            Shard::of(None, "a", 7),
            (0x07d6_6707_b49c_d92d_u64 % 7) as u16
        );
    }

    #[test]
    fn shards_spread_parents_about_evenly() {
        let count = 3;
        let mut per = [0usize; 3];
        for i in 0..3000 {
            per[usize::from(Shard::of(Some("ns"), &format!("cache-{i}"), count))] += 1;
        }
        assert!(per.iter().all(|n| (800..1200).contains(n)), "{per:?}");
    }

    #[test]
    fn one_shard_is_one_unsharded_scope() {
        assert_eq!(Shard::all(1), vec![None]);
        let three = Shard::all(3);
        assert_eq!(three.len(), 3);
        assert!(three.iter().enumerate().all(|(i, s)| {
            s.is_some_and(|s| {
                usize::from(s.index) == i
                    && s.count == 3
                    && s.selector() == format!("wasmop.dev/shard={i}")
            })
        }));
    }

    #[test]
    fn the_unassigned_selector_names_every_shard_of_the_count() {
        assert_eq!(Shard::unassigned(3), "wasmop.dev/shard notin (0,1,2)");
        assert!(Shard::unassigned(MAX_SHARDS).ends_with(",62,63)"));
    }

    #[test]
    fn each_parent_is_owned_by_exactly_one_shard() {
        let shards = Shard::all(4);
        for i in 0..100 {
            let name = format!("p{i}");
            let owners = shards
                .iter()
                .flatten()
                .filter(|s| s.owns(Some("ns"), &name))
                .count();
            assert_eq!(owners, 1);
        }
    }
}
