//! Comparing the stable version's answer with the candidate's (shadow).
//!
//! Children are matched by kind and name (their apiVersion's group, kind
//! and name); a child only one version wants is the first kind of
//! difference, then a child both want with other content, then the status.
//! The first difference found, in that order and then by kind and name,
//! names the comparison. A Secret's values are never named.

use std::collections::BTreeMap;

use serde_json::Value;

use super::diff;
use crate::validate::{DesiredChild, Validated};

/// How the two answers compare.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Same children with the same content, same status.
    Same,
    /// They differ; the first difference, for people.
    Different(String),
}

fn key(child: &DesiredChild) -> (String, String, String) {
    let group = child
        .api_version
        .rsplit_once('/')
        .map_or("", |(g, _)| g)
        .to_owned();
    (group, child.kind.clone(), child.name.clone())
}

/// Compares the stable version's answer with the candidate's.
pub fn compare(stable: &Validated, candidate: &Validated) -> Outcome {
    let index = |answer: &'_ Validated| -> BTreeMap<(String, String, String), Value> {
        answer
            .children
            .iter()
            .map(|c| (key(c), Value::Object(c.object.clone())))
            .collect()
    };
    let (before, after) = (index(stable), index(candidate));
    if let Some((_, kind, name)) = after.keys().find(|k| !before.contains_key(*k)) {
        return Outcome::Different(format!("the candidate also wants {kind} {name}"));
    }
    if let Some((_, kind, name)) = before.keys().find(|k| !after.contains_key(*k)) {
        return Outcome::Different(format!("the candidate drops {kind} {name}"));
    }
    for (k, b) in &before {
        let (_, kind, name) = k;
        if let Some(change) = diff::first(b, &after[k]) {
            let what = if kind == "Secret" {
                change.path
            } else {
                change.to_string()
            };
            return Outcome::Different(format!("{kind} {name} differs at {what}"));
        }
    }
    let status = |answer: &Validated| answer.status.clone().map(Value::Object);
    match (status(stable), status(candidate)) {
        (None, None) => Outcome::Same,
        (a, b) => match diff::first(&a.unwrap_or(Value::Null), &b.unwrap_or(Value::Null)) {
            None => Outcome::Same,
            Some(change) => Outcome::Different(format!("status differs at {change}")),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn child(kind: &str, name: &str, spec: Value) -> DesiredChild {
        let api_version = if kind == "Deployment" {
            "apps/v1"
        } else {
            "v1"
        };
        DesiredChild {
            api_version: api_version.into(),
            kind: kind.into(),
            name: name.into(),
            cluster_scoped: false,
            namespace: Some("ns".into()),
            object: json!({"apiVersion": api_version, "kind": kind,
                "metadata": {"name": name}, "spec": spec})
            .as_object()
            .cloned()
            .unwrap(),
        }
    }

    fn answer(children: Vec<DesiredChild>, status: Value) -> Validated {
        Validated {
            children,
            status: status.as_object().cloned(),
            requeue_after_seconds: None,
            finalized: false,
            events: Vec::new(),
            keep: Vec::new(),
        }
    }

    #[test]
    fn the_first_difference_is_named_children_before_status() {
        let stable = answer(
            vec![
                child("Deployment", "a", json!({"replicas": 3})),
                child("Service", "a", json!({})),
            ],
            json!({"phase": "Ready"}),
        );
        assert_eq!(compare(&stable, &stable.clone()), Outcome::Same);
        let mut pdb = stable.clone();
        pdb.children
            .push(child("PodDisruptionBudget", "a", json!({})));
        assert_eq!(
            compare(&stable, &pdb),
            Outcome::Different("the candidate also wants PodDisruptionBudget a".into())
        );
        let mut dropped = stable.clone();
        dropped.children.pop();
        assert_eq!(
            compare(&stable, &dropped),
            Outcome::Different("the candidate drops Service a".into())
        );
        let mut zero = stable.clone();
        zero.children[0] = child("Deployment", "a", json!({"replicas": 0}));
        zero.status = json!({"phase": "Pending"}).as_object().cloned();
        assert_eq!(
            compare(&stable, &zero),
            Outcome::Different("Deployment a differs at /spec/replicas: 3 -> 0".into())
        );
        let mut status = stable.clone();
        status.status = None;
        assert_eq!(
            compare(&stable, &status),
            Outcome::Different("status differs at /: {\"phase\":\"Ready\"} -> null".into())
        );
    }

    #[test]
    fn a_secrets_values_are_not_named() {
        let stable = answer(
            vec![child("Secret", "s", json!({"v": "hunter2"}))],
            json!(null),
        );
        let candidate = answer(
            vec![child("Secret", "s", json!({"v": "hunter3"}))],
            json!(null),
        );
        let Outcome::Different(text) = compare(&stable, &candidate) else {
            panic!("same")
        };
        assert_eq!(text, "Secret s differs at /spec/v");
    }
}
