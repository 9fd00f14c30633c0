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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ChildKind, KindRef};

    fn cache() -> Description {
        Description::new(KindRef::new("apps.example.com", "v1alpha1", "Cache"))
            .child(ChildKind::namespaced(KindRef::new(
                "apps",
                "v1",
                "Deployment",
            )))
            .finalizer("apps.example.com/cleanup")
    }

    fn record(phase: Phase) -> Record {
        Record {
            stable: "a".repeat(64),
            candidate: Some("b".repeat(64)),
            candidate_settings: settings_hash(Some("{}")),
            phase,
            ..Record::default()
        }
    }

    #[test]
    fn a_candidate_may_add_kinds_but_not_change_the_primary_a_childs_version_or_the_finalizer() {
        let stable = cache();
        let added = cache().child(ChildKind::namespaced(KindRef::new("", "v1", "ConfigMap")));
        assert!(check_same_kind(&stable, &added).is_ok());
        let cases = [
            (
                Description {
                    primary: KindRef::new("apps.example.com", "v1alpha1", "Store"),
                    ..cache()
                },
                "primary kind",
            ),
            (
                Description {
                    children: vec![ChildKind::namespaced(KindRef::new(
                        "apps",
                        "v2",
                        "Deployment",
                    ))],
                    ..cache()
                },
                "version of a child kind",
            ),
            (
                Description {
                    finalizer: None,
                    ..cache()
                },
                "finalizer",
            ),
        ];
        for (candidate, what) in cases {
            let refused = check_same_kind(&stable, &candidate).unwrap_err();
            assert_eq!(refused.what, what);
            assert!(
                refused.to_string().contains("rollout strategy Immediate"),
                "{refused}"
            );
        }
    }

    #[test]
    fn the_watches_cover_both_versions_kinds_once() {
        let a = cache();
        let b = cache().child(ChildKind::namespaced(KindRef::new("", "v1", "ConfigMap")));
        let both = union(&a, &b);
        let kinds: Vec<String> = both.children.iter().map(|c| c.kind.kind.clone()).collect();
        assert_eq!(kinds, ["Deployment", "ConfigMap"]);
        assert_eq!(union(&both, &a).children.len(), 2);
    }

    #[test]
    fn a_stable_version_is_its_module_and_during_a_rollout_its_settings() {
        let mut r = Record {
            stable: "a".repeat(64),
            ..Record::default()
        };
        assert!(is_stable(&r, &"a".repeat(64), Some("{\"x\":1}")));
        assert!(!is_stable(&r, &"b".repeat(64), None));
        r.candidate = Some("b".repeat(64));
        r.stable_settings = Some("{}".into());
        assert!(is_stable(&r, &"a".repeat(64), Some("{}")));
        assert!(!is_stable(&r, &"a".repeat(64), Some("{\"x\":1}")));
    }

    #[test]
    fn a_starting_host_resumes_the_rollout_it_finds() {
        let b = "b".repeat(64);
        let cases = [
            (
                Phase::Shadowing,
                Some("{}"),
                Resumption::Candidate(Mode::Shadow),
            ),
            (
                Phase::Progressing,
                Some("{}"),
                Resumption::Candidate(Mode::Waiting),
            ),
            (Phase::Aborted, Some("{}"), Resumption::RolledBack),
            // The same module with other settings is another version.
            (Phase::Shadowing, Some("{\"x\":1}"), Resumption::Propose),
        ];
        for (phase, settings, want) in cases {
            assert_eq!(
                resumption(&record(phase), &b, settings),
                want,
                "{phase:?} {settings:?}"
            );
        }
        let mut canary = record(Phase::Progressing);
        canary.set_cut(Some(7));
        assert_eq!(
            resumption(&canary, &b, Some("{}")),
            Resumption::Candidate(Mode::Canary { cut: 7 })
        );
        assert_eq!(
            resumption(&record(Phase::Progressing), &"c".repeat(64), Some("{}")),
            Resumption::Propose
        );
    }
}
