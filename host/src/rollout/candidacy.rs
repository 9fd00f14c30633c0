//! Candidacy: what decides whether a module can be a candidate beside the
//! stable version, what the watches of both cover, and how a starting host
//! picks up a rollout an earlier host left. Pure: no I/O.

use crate::model::Description;

use super::record::{Phase, Record, settings_hash};
use super::slot::Mode;

/// A candidate that reconciles another primary kind, declares another
/// finalizer, or another version of a child kind, than the stable version.
#[derive(Debug, thiserror::Error)]
#[error(
    "the candidate {what} ({candidate}) differs from the running version's ({stable}): that change needs rollout strategy Immediate"
)]
pub struct KindsChanged {
    /// What differs.
    pub what: &'static str,
    /// The running version's.
    pub stable: String,
    /// The candidate's.
    pub candidate: String,
}

/// Refuses a candidate described by `candidate` that reconciles another
/// primary kind, another version of a child kind, or declares another
/// finalizer, than the stable version (`stable`).
pub fn check_same_kind(stable: &Description, candidate: &Description) -> Result<(), KindsChanged> {
    let (s, c) = (stable, candidate);
    if !s.primary.same_resource(&c.primary) {
        return Err(KindsChanged {
            what: "primary kind",
            stable: s.primary.to_string(),
            candidate: c.primary.to_string(),
        });
    }
    for child in &c.children {
        if let Some(same) = s
            .children
            .iter()
            .find(|k| k.kind.same_resource(&child.kind) && k.kind.version != child.kind.version)
        {
            return Err(KindsChanged {
                what: "version of a child kind",
                stable: same.kind.to_string(),
                candidate: child.kind.to_string(),
            });
        }
    }
    if s.finalizer != c.finalizer {
        let show = |f: &Option<String>| f.clone().unwrap_or_else(|| "none".into());
        return Err(KindsChanged {
            what: "finalizer",
            stable: show(&s.finalizer),
            candidate: show(&c.finalizer),
        });
    }
    Ok(())
}

/// What the watches of two versions cover: `a`'s kinds and those of `b`'s
/// that `a` lacks.
pub fn union(a: &Description, b: &Description) -> Description {
    let mut out = a.clone();
    for child in &b.children {
        if !out
            .children
            .iter()
            .any(|c| c.kind.same_resource(&child.kind))
        {
            out.children.push(child.clone());
        }
    }
    for related in &b.related {
        if !out.related.contains(related) {
            out.related.push(related.clone());
        }
    }
    out
}

/// Whether the record's stable version is the module `digest` with
/// `settings`: its module and, while a rollout runs or was rolled back,
/// its settings.
pub fn is_stable(record: &Record, digest: &str, settings: Option<&str>) -> bool {
    record.stable == digest
        && (record.candidate.is_none() || record.stable_settings.as_deref() == settings)
}

/// What a starting host makes of the rollout an earlier host left (its
/// `record`), for an entry listing the module `digest` with `settings`
/// that is not the record's stable version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resumption {
    /// The entry's module is the rollout's candidate: the rollout goes on,
    /// the candidate in this mode.
    Candidate(Mode),
    /// The rollout was rolled back: the stable version alone.
    RolledBack,
    /// The entry lists another module: the stable version starts and the
    /// entry's module rolls out beside it as a new candidate.
    Propose,
}

/// See [`Resumption`].
pub fn resumption(record: &Record, digest: &str, settings: Option<&str>) -> Resumption {
    if record.candidate.as_deref() != Some(digest)
        || record.candidate_settings != settings_hash(settings)
    {
        return Resumption::Propose;
    }
    match record.phase {
        Phase::Progressing => Resumption::Candidate(
            record
                .cut()
                .map_or(Mode::Waiting, |cut| Mode::Canary { cut }),
        ),
        Phase::Shadowing => Resumption::Candidate(Mode::Shadow),
        _ => Resumption::RolledBack,
    }
}
