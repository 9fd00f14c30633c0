//! Which side of a rollout a parent is on.
//!
//! Each parent has a fixed position: the first eight bytes of the SHA-256
//! of its uid, as a number. A step puts on the candidate every parent whose
//! position is at or below a cut; the cut of a step is the position of the
//! parent at that percentile of the parents the host sees when the step
//! starts, so exactly that share moves (rounded up), and a later step only
//! raises the cut: parents join the candidate and never go back and forth.
//! The cut is recorded in the status ConfigMap, so a restarted host, or a
//! standby that takes over, splits the parents exactly as before.

use sha2::{Digest, Sha256};

/// A parent's position: the first eight bytes of SHA-256 of its uid.
pub fn position(uid: &str) -> u64 {
    let digest = Sha256::digest(uid.as_bytes());
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(bytes)
}

/// The cut that puts `percent` of the parents at `positions` (rounded up)
/// on the candidate, never below `floor` (the previous step's cut). With no
/// parents the cut is that share of all positions, so parents created later
/// split about that way.
pub fn cut(positions: &mut [u64], percent: u8, floor: Option<u64>) -> u64 {
    let percent = u64::from(percent.min(100));
    let cut = if percent == 100 {
        u64::MAX
    } else if positions.is_empty() {
        (u64::MAX / 100) * percent
    } else {
        positions.sort_unstable();
        let count = (positions.len() as u64 * percent).div_ceil(100).max(1);
        let index = usize::try_from(count - 1).unwrap_or(usize::MAX);
        positions[index.min(positions.len() - 1)]
    };
    floor.map_or(cut, |floor| cut.max(floor))
}

/// Whether the parent at `position` is on the candidate under `cut`
/// (none: nobody is).
pub fn on_candidate(position: u64, cut: Option<u64>) -> bool {
    cut.is_some_and(|cut| position <= cut)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uids(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("uid-{i:04}")).collect()
    }

    #[test]
    fn a_step_moves_its_share_rounded_up_and_never_more() {
        for (parents, percent, moved) in [(20, 10, 2), (21, 10, 3), (1000, 10, 100), (3, 50, 2)] {
            let mut positions: Vec<u64> = uids(parents).iter().map(|u| position(u)).collect();
            let all = positions.clone();
            let cut = cut(&mut positions, percent, None);
            let on = all.iter().filter(|p| on_candidate(**p, Some(cut))).count();
            assert_eq!(on, moved, "{parents} parents at {percent}%");
        }
    }

    #[test]
    fn a_later_step_only_adds_parents() {
        let all: Vec<u64> = uids(200).iter().map(|u| position(u)).collect();
        let first = cut(&mut all.clone(), 10, None);
        // Fewer parents when the second step starts: its cut may not fall.
        let second = cut(&mut all[..20].to_vec(), 5, Some(first));
        assert!(second >= first);
        for p in &all {
            assert!(!on_candidate(*p, Some(first)) || on_candidate(*p, Some(second)));
        }
    }

    #[test]
    fn the_last_step_moves_everyone_and_no_cut_moves_nobody() {
        assert_eq!(cut(&mut [], 100, None), u64::MAX);
        assert!(on_candidate(u64::MAX, Some(u64::MAX)));
        assert!(!on_candidate(0, None));
        let empty = cut(&mut [], 10, None);
        assert!(empty > u64::MAX / 11 && empty < u64::MAX / 9);
    }

    #[test]
    fn positions_are_stable() {
        assert_eq!(position("a"), position("a"));
        assert_ne!(position("a"), position("b"));
    }
}
