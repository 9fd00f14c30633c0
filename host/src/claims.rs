//! A kind has one guest across hosts.
//!
//! A host that follows a guest list records, on the CRD of each of its
//! guests' primary kinds, which guest of which list manages that kind where:
//! the annotation `claims.wasmop.dev/<namespace>` for each namespace the
//! guest watches, or `claims.wasmop.dev/All-namespaces` for a guest of every
//! namespace (or of a cluster-scoped kind), its value
//! `<list namespace>/<list name>/<guest>`. Another list's guest whose kind
//! is claimed where it would watch too is refused with `KindTaken`,
//! whichever host started first. A claim of another guest of the same list
//! (a guest renamed while its host was down) is taken over: within a list,
//! the host itself refuses two guests of one kind.
//!
//! A claim stays until its holder releases it: when the guest leaves its
//! list, or when its namespaces change (the claims then follow them). It
//! stays when the host stops, so a restarted host, or a standby of the same
//! list, finds it its own. A claim that a list which no longer runs left
//! behind is removed by hand, as the refusal says
//! (`kubectl annotate crd <crd> claims.wasmop.dev/<scope>-`).
//!
//! A host given guests with `--guest` (no list) checks the claims and makes
//! none. A primary kind that no CRD defines (a built-in kind) has no claims.

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Map, Value, json};

/// The prefix of a claim's annotation.
pub const PREFIX: &str = "claims.wasmop.dev/";

/// The scope of a claim on every namespace (no namespace name has capitals).
pub const ALL_NAMESPACES: &str = "All-namespaces";

/// Tries of a claim that the API server's optimistic concurrency refuses
/// (another host claimed the same kind at once), each after a longer
/// pause.
const TRIES: u32 = 10;

/// Why a claim was refused or could not be made.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Another list's guest claims the kind where this one would watch.
    #[error(
        "{crd} is claimed by guest {holder} in {scope} (if that list no longer lists it, remove the claim: kubectl annotate crd {crd} {PREFIX}{scope}-)"
    )]
    Taken {
        /// The CRD.
        crd: String,
        /// `<list namespace>/<list name>/<guest>`.
        holder: String,
        /// The namespace, or [`ALL_NAMESPACES`].
        scope: String,
    },
    /// The CRD changed under every try to write its claims.
    #[error("the CRD {crd} changed under each of {TRIES} tries to write its claims")]
    Contended {
        /// The CRD.
        crd: String,
    },
    /// The CRD could not be read or written.
    #[error("cannot read or write the claims on CRD {crd}: {source}")]
    Api {
        /// The CRD.
        crd: String,
        /// Why.
        source: kube::Error,
    },
}

/// What one guest claims.
#[derive(Clone, Debug)]
pub struct Claim<'a> {
    /// The CRD of its primary kind: `<plural>.<group>`.
    pub crd: String,
    /// The namespaces it watches; empty for all.
    pub namespaces: &'a [String],
    /// `<list namespace>/<list name>/<guest>`; `None` checks without
    /// claiming.
    pub holder: Option<String>,
}

impl Claim<'_> {
    /// The annotation keys of this claim.
    fn keys(&self) -> Vec<String> {
        if self.namespaces.is_empty() {
            vec![format!("{PREFIX}{ALL_NAMESPACES}")]
        } else {
            self.namespaces
                .iter()
                .map(|ns| format!("{PREFIX}{ns}"))
                .collect()
        }
    }

    /// The first claim of another list's guest among `annotations` whose
    /// scope meets this claim's: `(scope, holder)`. A claim of another
    /// guest of the same list is no conflict: within a list, the host
    /// itself refuses two guests of one kind, so such a claim is a renamed
    /// or removed guest's, and this one takes it over.
    fn conflict(&self, annotations: &BTreeMap<String, String>) -> Option<(String, String)> {
        annotations.iter().find_map(|(key, holder)| {
            let scope = key.strip_prefix(PREFIX)?;
            let ours = self
                .holder
                .as_deref()
                .is_some_and(|mine| list_of(mine) == list_of(holder));
            let meets = scope == ALL_NAMESPACES
                || self.namespaces.is_empty()
                || self.namespaces.iter().any(|ns| ns == scope);
            (!ours && meets).then(|| (scope.to_owned(), holder.clone()))
        })
    }

    /// The annotations to write so that this holder's claims are exactly
    /// this claim's keys (`null` removes one); `None` when they are.
    fn change(&self, annotations: &BTreeMap<String, String>) -> Option<Map<String, Value>> {
        let holder = self.holder.as_deref()?;
        let keys = self.keys();
        let mut change = Map::new();
        for key in &keys {
            if annotations.get(key).map(String::as_str) != Some(holder) {
                change.insert(key.clone(), holder.into());
            }
        }
        for (key, value) in annotations {
            if key.starts_with(PREFIX) && value == holder && !keys.contains(key) {
                change.insert(key.clone(), Value::Null);
            }
        }
        (!change.is_empty()).then_some(change)
    }
}

/// The list part of a holder, `<list namespace>/<list name>`.
fn list_of(holder: &str) -> &str {
    holder.rsplit_once('/').map_or(holder, |(list, _)| list)
}

/// Refuses `claim` when another list's guest claims its kind where it
/// would watch; else records it (when it has a holder). A kind without a
/// CRD passes.
pub async fn claim(client: &Client, claim: &Claim<'_>) -> Result<(), Error> {
    update(client, &claim.crd, |annotations| {
        if let Some((scope, holder)) = claim.conflict(annotations) {
            return Err(Error::Taken {
                crd: claim.crd.clone(),
                holder,
                scope,
            });
        }
        Ok(claim.change(annotations))
    })
    .await
}

/// Removes `holder`'s claims from `crd`.
pub async fn release(client: &Client, crd: &str, holder: &str) -> Result<(), Error> {
    update(client, crd, |annotations| {
        let change: Map<String, Value> = annotations
            .iter()
            .filter(|(key, value)| key.starts_with(PREFIX) && *value == holder)
            .map(|(key, _)| (key.clone(), Value::Null))
            .collect();
        Ok((!change.is_empty()).then_some(change))
    })
    .await
}

/// Reads `crd`'s annotations, asks `decide` what to change (nothing:
/// done) and writes that at the version read, reading again when the CRD
/// changed meanwhile, at most [`TRIES`] times. A missing CRD needs nothing.
async fn update(
    client: &Client,
    crd: &str,
    decide: impl Fn(&BTreeMap<String, String>) -> Result<Option<Map<String, Value>>, Error>,
) -> Result<(), Error> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let failed = |source| Error::Api {
        crd: crd.to_owned(),
        source,
    };
    for attempt in 0..TRIES {
        pause(attempt).await;
        let Some(object) = api.get_opt(crd).await.map_err(failed)? else {
            return Ok(());
        };
        let annotations = object.metadata.annotations.unwrap_or_default();
        let Some(change) = decide(&annotations)? else {
            return Ok(());
        };
        if write(&api, crd, object.metadata.resource_version, change)
            .await
            .map_err(failed)?
        {
            return Ok(());
        }
    }
    Err(Error::Contended {
        crd: crd.to_owned(),
    })
}

/// Before try `attempt`: nothing at first, then 25 ms more each time, a
/// few milliseconds apart between processes (their ids differ).
async fn pause(attempt: u32) {
    if attempt > 0 {
        let spread = u64::from(std::process::id() % 16);
        let millis = 25 * u64::from(attempt) + spread;
        tokio::time::sleep(std::time::Duration::from_millis(millis)).await;
    }
}

/// Writes `annotations` on `crd` if it is still at `version`; `false` when
/// it changed meanwhile.
async fn write(
    api: &Api<CustomResourceDefinition>,
    crd: &str,
    version: Option<String>,
    annotations: Map<String, Value>,
) -> Result<bool, kube::Error> {
    let patch = json!({"metadata": {"resourceVersion": version, "annotations": annotations}});
    match api
        .patch(crd, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (format!("{PREFIX}{k}"), (*v).to_owned()))
            .collect()
    }

    fn claim<'a>(namespaces: &'a [String], holder: &str) -> Claim<'a> {
        Claim {
            crd: "caches.apps.example.com".into(),
            namespaces,
            holder: Some(holder.into()),
        }
    }

    #[test]
    fn claims_meet_where_their_namespaces_do() {
        let a = ["a".to_owned()];
        let b = ["b".to_owned()];
        let theirs = annotations(&[("a", "ns/list/x")]);
        assert!(claim(&a, "ns/other/y").conflict(&theirs).is_some());
        assert!(claim(&b, "ns/other/y").conflict(&theirs).is_none());
        // Every namespace meets any namespace, both ways.
        assert!(claim(&[], "ns/other/y").conflict(&theirs).is_some());
        let all = annotations(&[(ALL_NAMESPACES, "ns/list/x")]);
        assert_eq!(
            claim(&b, "ns/other/y").conflict(&all),
            Some((ALL_NAMESPACES.to_owned(), "ns/list/x".to_owned()))
        );
        // Its own claim is no conflict, nor another guest's of its list (a
        // renamed guest's), which it takes over; others' annotations are not
        // claims.
        assert!(claim(&a, "ns/list/x").conflict(&theirs).is_none());
        assert!(claim(&a, "ns/list/renamed").conflict(&theirs).is_none());
        let taken_over = claim(&a, "ns/list/renamed").change(&theirs).unwrap();
        assert_eq!(taken_over[&format!("{PREFIX}a")], "ns/list/renamed");
        let other: BTreeMap<String, String> =
            [("team.example.com/owner".to_owned(), "x".to_owned())].into();
        assert!(claim(&a, "ns/other/y").conflict(&other).is_none());
    }

    #[test]
    fn a_claim_follows_its_namespaces_and_writes_nothing_when_it_stands() {
        let ab = ["a".to_owned(), "b".to_owned()];
        let mine = annotations(&[("a", "ns/list/x"), ("c", "ns/list/x"), ("d", "ns/other/y")]);
        let change = claim(&ab, "ns/list/x").change(&mine).unwrap();
        assert_eq!(change.len(), 2, "{change:?}");
        assert_eq!(change[&format!("{PREFIX}b")], "ns/list/x");
        assert_eq!(change[&format!("{PREFIX}c")], Value::Null);
        let standing = annotations(&[("a", "ns/list/x"), ("b", "ns/list/x")]);
        assert!(claim(&ab, "ns/list/x").change(&standing).is_none());
        let check_only = Claim {
            holder: None,
            ..claim(&ab, "ns/list/x")
        };
        assert!(check_only.change(&BTreeMap::new()).is_none());
    }
}
