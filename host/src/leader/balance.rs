//! What a replica does with the units of work, given what the Leases say:
//! with R live replicas and S units in all, it holds at most ceil(S/R)
//! units, takes free ones while it holds fewer, and hands extra ones back.
//! The shards of one guest are spread: a replica takes first the free units
//! of the guests it holds fewest of (the guests of most shards first), and
//! hands back first the units of the guest it holds most of.

use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

/// A unit's Lease as the API server shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Lease {
    /// No Lease, no holder, or its holder let it expire.
    Free,
    /// Held by this replica.
    Ours,
    /// Held by another live replica.
    Theirs,
}

/// What this replica does about a unit now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Doing {
    /// Nothing: no election runs for it here.
    Idle,
    /// Its election runs here and has not won (yet).
    Contending,
    /// This replica holds it.
    Holding,
    /// This replica is handing it back.
    Releasing,
}

/// One unit: its Lease's name, its Lease and what this replica does.
#[derive(Clone, Debug)]
pub(super) struct Unit {
    pub(super) name: String,
    /// The guest whose unit it is.
    pub(super) group: String,
    /// The identity of its live holder (this replica's, when ours).
    pub(super) holder: Option<String>,
    pub(super) lease: Lease,
    pub(super) doing: Doing,
    /// This replica handed it back a moment ago: not taken again until the
    /// others had a chance.
    pub(super) cooling: bool,
}

/// What to change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Action {
    /// Start the unit's election.
    Contend(String),
    /// Stop an election that another replica's live holding makes vain.
    Stop(String),
    /// Hand the unit back: finish its work, then release its Lease.
    Release(String),
}

/// The units this replica holds at most: ceil(units / replicas).
pub(super) fn share(units: usize, replicas: usize) -> usize {
    units.div_ceil(replicas.max(1))
}

/// What `identity` does with `units` while `replicas` replicas live.
pub(super) fn decide(identity: &str, units: &[Unit], replicas: usize) -> Vec<Action> {
    let share = share(units.len(), replicas);
    let mut actions = Vec::new();
    let mut held: Vec<&Unit> = units.iter().filter(|u| u.doing == Doing::Holding).collect();
    if held.len() > share {
        // One at a time from the guest this replica holds most of, the
        // last by name first: each replica over its share hands back what
        // the others are most likely to take.
        for _ in share..held.len() {
            let Some(i) = (0..held.len()).max_by(|&a, &b| {
                let count = |u: &Unit| held.iter().filter(|h| h.group == u.group).count();
                (count(held[a]), &held[a].name).cmp(&(count(held[b]), &held[b].name))
            }) else {
                break;
            };
            actions.push(Action::Release(held.remove(i).name.clone()));
        }
    }
    if actions.is_empty()
        && let Some(unit) = spread(identity, units, replicas, share)
    {
        return vec![Action::Release(unit)];
    }
    let mut busy = held.len() + units.iter().filter(|u| u.doing == Doing::Releasing).count();
    for unit in units {
        if unit.doing == Doing::Contending {
            if unit.lease == Lease::Theirs {
                actions.push(Action::Stop(unit.name.clone()));
            } else {
                busy += 1;
            }
        }
    }
    // What this replica holds or goes for, by guest.
    let mut mine: HashMap<&str, usize> = HashMap::new();
    let stopped = |u: &Unit| u.doing == Doing::Contending && u.lease == Lease::Theirs;
    for unit in units
        .iter()
        .filter(|u| u.doing != Doing::Idle && !stopped(u))
    {
        *mine.entry(unit.group.as_str()).or_default() += 1;
    }
    let mut sizes: HashMap<&str, usize> = HashMap::new();
    for unit in units {
        *sizes.entry(unit.group.as_str()).or_default() += 1;
    }
    // Free units, one at a time: of the guest this replica has fewest of,
    // the guests of most units first, then in an order of this replica's
    // own, so that replicas starting together contend for different ones.
    let mut free: Vec<&Unit> = units
        .iter()
        .filter(|u| u.doing == Doing::Idle && u.lease == Lease::Free && !u.cooling)
        .collect();
    let order = |u: &Unit| {
        let mut hasher = DefaultHasher::new();
        (identity, &u.name).hash(&mut hasher);
        hasher.finish()
    };
    for _ in 0..share.saturating_sub(busy) {
        let Some(i) = (0..free.len()).min_by_key(|&i| {
            let u = free[i];
            let group = u.group.as_str();
            (
                mine.get(group).copied().unwrap_or(0),
                std::cmp::Reverse(sizes[group]),
                order(u),
            )
        }) else {
            break;
        };
        let unit = free.remove(i);
        *mine.entry(unit.group.as_str()).or_default() += 1;
        actions.push(Action::Contend(unit.name.clone()));
    }
    actions
}

/// A unit to hand back so that one guest's units spread over the
/// replicas, where each replica holds at most ceil(K/R) of a guest's K:
/// - one of a guest this replica holds more of, when another replica has
///   room for it or a free unit of a guest this replica holds fewer of is
///   waiting for this replica's room;
/// - one of another guest, when this replica holds fewer of a guest that
///   a replica holds more of, has no room itself, and neither has any
///   other replica: the room it makes lets the two swap.
///
/// Only when every unit is held or free and nothing is being taken or
/// handed back here.
fn spread(identity: &str, units: &[Unit], replicas: usize, share: usize) -> Option<String> {
    if units
        .iter()
        .any(|u| matches!(u.doing, Doing::Contending | Doing::Releasing))
    {
        return None;
    }
    let mut totals: HashMap<&str, usize> = HashMap::new();
    let mut by_group: HashMap<(&str, &str), usize> = HashMap::new();
    let mut sizes: HashMap<&str, usize> = HashMap::new();
    for unit in units {
        *sizes.entry(unit.group.as_str()).or_default() += 1;
        if let Some(holder) = unit.holder.as_deref() {
            *totals.entry(holder).or_default() += 1;
            *by_group.entry((holder, unit.group.as_str())).or_default() += 1;
        }
    }
    let cap = |group: &str| sizes[group].div_ceil(replicas.max(1));
    let mine = |group: &str| by_group.get(&(identity, group)).copied().unwrap_or(0);
    let my_total = totals.get(identity).copied().unwrap_or(0);
    let full = totals.values().filter(|n| **n >= share).count();
    let others_with_room = replicas
        .saturating_sub(full)
        .saturating_sub(usize::from(my_total < share));
    let ours = |group: &str| -> Vec<&Unit> {
        let mut held: Vec<&Unit> = units
            .iter()
            .filter(|u| u.doing == Doing::Holding && u.group == group)
            .collect();
        held.sort_by(|a, b| b.name.cmp(&a.name));
        held
    };
    let mut groups: Vec<&str> = sizes.keys().copied().collect();
    groups.sort_unstable();
    for group in &groups {
        if mine(group) <= cap(group) {
            continue;
        }
        let waiting = my_total >= share
            && units
                .iter()
                .any(|u| u.lease == Lease::Free && !u.cooling && mine(&u.group) < cap(&u.group));
        if others_with_room > 0 || waiting {
            return ours(group).first().map(|u| u.name.clone());
        }
    }
    if my_total < share || others_with_room > 0 {
        return None;
    }
    for group in &groups {
        let crowded = by_group
            .iter()
            .any(|((holder, g), n)| *holder != identity && g == group && *n > cap(group));
        if mine(group) < cap(group) && crowded {
            // One of the guest this replica holds most of, but this one.
            let other = groups
                .iter()
                .filter(|g| *g != group && mine(g) > 0)
                .max_by_key(|g| (mine(g), std::cmp::Reverse(**g)))?;
            return ours(other).first().map(|u| u.name.clone());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(name: &str, lease: Lease, doing: Doing) -> Unit {
        Unit {
            name: name.into(),
            group: name.into(),
            holder: match lease {
                Lease::Free => None,
                Lease::Ours => Some("a".into()),
                Lease::Theirs => Some("z".into()),
            },
            lease,
            doing,
            cooling: false,
        }
    }

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("u{i}")).collect()
    }

    #[test]
    fn the_share_is_the_ceiling_of_units_over_replicas() {
        assert_eq!(share(9, 3), 3);
        assert_eq!(share(9, 4), 3);
        assert_eq!(share(10, 3), 4);
        assert_eq!(share(1, 3), 1);
        assert_eq!(share(0, 3), 0);
        assert_eq!(share(5, 0), 5, "no replica Lease seen yet: this one");
    }

    #[test]
    fn a_lone_replica_contends_for_every_free_unit() {
        let units: Vec<Unit> = names(4)
            .iter()
            .map(|n| unit(n, Lease::Free, Doing::Idle))
            .collect();
        let actions = decide("a", &units, 1);
        assert_eq!(actions.len(), 4);
        assert!(actions.iter().all(|a| matches!(a, Action::Contend(_))));
    }

    #[test]
    fn a_replica_contends_only_up_to_its_share() {
        let units: Vec<Unit> = names(9)
            .iter()
            .map(|n| unit(n, Lease::Free, Doing::Idle))
            .collect();
        assert_eq!(decide("a", &units, 3).len(), 3);
        let mut units = units;
        units[0].doing = Doing::Holding;
        units[0].lease = Lease::Ours;
        units[1].doing = Doing::Contending;
        let actions = decide("a", &units, 3);
        assert_eq!(actions.len(), 1, "{actions:?}");
    }

    #[test]
    fn replicas_starting_together_prefer_different_units() {
        let units: Vec<Unit> = names(9)
            .iter()
            .map(|n| unit(n, Lease::Free, Doing::Idle))
            .collect();
        let picks: Vec<Vec<Action>> = ["host-a_1", "host-b_2", "host-c_3"]
            .iter()
            .map(|id| decide(id, &units, 3))
            .collect();
        assert!(picks[0] != picks[1] || picks[1] != picks[2], "{picks:?}");
    }

    #[test]
    fn a_replica_over_its_share_hands_back_the_extra_units_when_another_joins() {
        let units: Vec<Unit> = names(6)
            .iter()
            .map(|n| unit(n, Lease::Ours, Doing::Holding))
            .collect();
        let actions = decide("a", &units, 2);
        assert_eq!(
            actions,
            vec![
                Action::Release("u5".into()),
                Action::Release("u4".into()),
                Action::Release("u3".into())
            ]
        );
    }

    #[test]
    fn an_election_another_live_holder_wins_is_stopped_and_taken_units_are_left_alone() {
        let units = vec![
            unit("u0", Lease::Theirs, Doing::Contending),
            unit("u1", Lease::Theirs, Doing::Idle),
            unit("u2", Lease::Free, Doing::Idle),
        ];
        let actions = decide("a", &units, 3);
        assert_eq!(
            actions,
            vec![Action::Stop("u0".into()), Action::Contend("u2".into())]
        );
    }

    #[test]
    fn a_unit_just_handed_back_is_not_taken_again_at_once() {
        let mut cooling = unit("u0", Lease::Free, Doing::Idle);
        cooling.cooling = true;
        assert!(decide("a", &[cooling], 1).is_empty());
    }

    /// Units of one guest of three shards and six guests of one.
    fn fleet() -> Vec<Unit> {
        let mut units: Vec<Unit> = names(6)
            .iter()
            .map(|n| unit(n, Lease::Free, Doing::Idle))
            .collect();
        for k in 0..3 {
            let mut shard = unit(&format!("cache-{k}"), Lease::Free, Doing::Idle);
            shard.group = "cache".into();
            units.push(shard);
        }
        units
    }

    #[test]
    fn a_replica_goes_first_for_one_shard_of_the_guest_of_most_shards() {
        for id in ["host-a_1", "host-b_2", "host-c_3", "d"] {
            let actions = decide(id, &fleet(), 3);
            let shards = actions
                .iter()
                .filter(|a| matches!(a, Action::Contend(n) if n.starts_with("cache-")))
                .count();
            assert_eq!(actions.len(), 3, "{actions:?}");
            assert_eq!(shards, 1, "{id}: {actions:?}");
            assert!(
                matches!(&actions[0], Action::Contend(n) if n.starts_with("cache-")),
                "{actions:?}"
            );
        }
        // The shard it lost to another replica: it goes for another one.
        let mut units = fleet();
        units[6].lease = Lease::Theirs;
        units[6].doing = Doing::Contending;
        units[0].doing = Doing::Contending;
        units[1].doing = Doing::Contending;
        let actions = decide("a", &units, 3);
        assert_eq!(actions[0], Action::Stop("cache-0".into()));
        assert!(
            matches!(&actions[1], Action::Contend(n) if n.starts_with("cache-")),
            "{actions:?}"
        );
    }

    #[test]
    fn a_replica_over_its_share_hands_back_the_guest_it_holds_most_of() {
        let mut units = fleet();
        for i in [0, 6, 7, 8] {
            units[i].lease = Lease::Ours;
            units[i].doing = Doing::Holding;
        }
        // Nine units, four replicas: three each at most.
        let actions = decide("a", &units, 4);
        assert_eq!(actions, vec![Action::Release("cache-2".into())]);
    }

    #[test]
    fn two_shards_of_one_guest_on_one_replica_are_swapped_for_another_guest() {
        // Three replicas at their share of three: a holds cache-0 and
        // cache-2 and u0; b holds cache-1, u1 and u2; c holds u3, u4, u5.
        let units = fleet();
        let owner = |name: &str| match name {
            "cache-0" | "cache-2" | "u0" => "a",
            "cache-1" | "u1" | "u2" => "b",
            _ => "c",
        };
        let view = |units: &[Unit], me: &str| -> Vec<Unit> {
            units
                .iter()
                .map(|u| {
                    let holder = owner(&u.name);
                    let mut u = u.clone();
                    u.holder = Some(holder.into());
                    (u.lease, u.doing) = if holder == me {
                        (Lease::Ours, Doing::Holding)
                    } else {
                        (Lease::Theirs, Doing::Idle)
                    };
                    u
                })
                .collect()
        };
        // c, which holds no shard of the guest and has no room, makes room.
        assert_eq!(
            decide("c", &view(&units, "c"), 3),
            vec![Action::Release("u3".into())]
        );
        // b holds its one shard: nothing to do.
        assert!(decide("b", &view(&units, "b"), 3).is_empty());
        // a waits until there is room somewhere.
        assert!(decide("a", &view(&units, "a"), 3).is_empty());
        // Once c handed u3 back, a hands back a shard, for c to take.
        let mut from_a = view(&units, "a");
        from_a[3].holder = None;
        from_a[3].lease = Lease::Free;
        assert_eq!(
            decide("a", &from_a, 3),
            vec![Action::Release("cache-2".into())]
        );
        // And c, with room, goes first for the shard.
        let mut from_c = view(&units, "c");
        from_c[3].holder = None;
        from_c[3].lease = Lease::Free;
        from_c[3].doing = Doing::Idle;
        from_c[3].cooling = true;
        from_c[8].holder = None;
        from_c[8].lease = Lease::Free;
        assert_eq!(
            decide("c", &from_c, 3),
            vec![Action::Contend("cache-2".into())]
        );
    }
}
