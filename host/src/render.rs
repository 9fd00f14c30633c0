//! `wasmop render`: one reconcile offline, no cluster.
//!
//! Runs the guest with the same sandbox, limits and validation as the
//! controller, so what renders cleanly here is what the host would apply
//! (minus ownership stamping, which needs a real parent UID, and the checks
//! that need the cluster: the ownership fence and the host's own objects).
//! Related objects given with `--related` are matched to the parent by the
//! controller's own rules, and Secrets are concealed as the controller
//! conceals them, in what the guest gets and in what is printed.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::controller::reconcile::gather;
use crate::model::{Event, ObjectRef};
use crate::protected::ProtectedObjects;
use crate::runtime::{CallError, Guest};
use crate::validate::{self, ParentScope, Rules, Violation};

/// Why a render failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The guest call failed.
    #[error("reconcile failed{}", refusals(refused))]
    Call {
        /// Why.
        #[source]
        source: CallError,
        /// Outbound requests the host refused during the call.
        refused: Vec<String>,
    },
    /// The answer broke a rule.
    #[error("invalid guest response")]
    Invalid(#[from] Violation),
    /// The parent is not an object with metadata.
    #[error("the parent must be a Kubernetes object with metadata.name")]
    BadParent,
    /// The related objects pass the guest's bounds, as they would in
    /// `run`.
    #[error(transparent)]
    RelatedTooLarge(#[from] crate::controller::related::RelatedTooLarge),
    /// The parent's kind is not the guest's primary kind.
    #[error("the parent is a {found}, but the guest manages {expected}")]
    WrongKind {
        /// The guest's primary kind.
        expected: String,
        /// The parent's kind.
        found: String,
    },
}

/// The result printed by `wasmop render` (`-o json` keys are an interface
/// contract: `children`, `status`, `requeueAfterSeconds`, `finalized`,
/// `events`; `keep` lists the observed children the answer keeps, and
/// `contract` the WIT package the module was built against).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Rendered {
    /// The contract version of the module, e.g. `wasmop:operator@0.1.0`.
    pub contract: &'static str,
    /// Desired children.
    pub children: Vec<Map<String, Value>>,
    /// Desired status.
    pub status: Option<Map<String, Value>>,
    /// Requested requeue delay.
    pub requeue_after_seconds: Option<u32>,
    /// Deletion path: cleanup done.
    pub finalized: bool,
    /// Events the guest asked for.
    pub events: Vec<Event>,
    /// Observed children left as they are.
    pub keep: Vec<ObjectRef>,
    /// Outbound requests the host refused (`METHOD url: why`); only shown
    /// when there are some.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<String>,
}

/// How a failed render lists the outbound requests refused during it.
fn refusals(refused: &[String]) -> String {
    if refused.is_empty() {
        return String::new();
    }
    format!(
        "; the host refused outbound requests (allow a host with --allow-outbound <scheme://host[:port]>): {}",
        refused.join("; ")
    )
}

/// What `wasmop render` hands the guest besides the parent.
#[derive(Debug, Default)]
pub struct Inputs {
    /// The observed children.
    pub observed: Vec<Value>,
    /// Candidates for the related objects: only those of a related kind
    /// that map to the parent reach the guest.
    pub related: Vec<Value>,
    /// Render the deletion path.
    pub deleting: bool,
    /// Hand the guest Secret values (the guest list's `secretValues`).
    pub secret_values: bool,
    /// The host's time in Unix seconds; default the clock's.
    pub now: Option<u64>,
}

/// Runs one reconcile of `parent` with `inputs`.
pub fn render(guest: &Guest, parent: Value, inputs: Inputs) -> Result<Rendered, Error> {
    let Inputs {
        observed,
        related,
        deleting,
        secret_values,
        now,
    } = inputs;
    let meta = parent
        .get("metadata")
        .and_then(Value::as_object)
        .ok_or(Error::BadParent)?;
    if meta.get("name").and_then(Value::as_str).is_none() {
        return Err(Error::BadParent);
    }
    let primary = &guest.description().primary;
    let (api_version, kind) = (
        parent
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default(),
        parent
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default(),
    );
    if !primary.matches(api_version, kind) {
        return Err(Error::WrongKind {
            expected: primary.to_string(),
            found: format!("{api_version}/{kind}"),
        });
    }
    let namespace = meta
        .get("namespace")
        .and_then(Value::as_str)
        .unwrap_or("default")
        .to_string();
    let related = related_of(guest, &parent, &namespace, related, secret_values)?;
    let request = gather::request(parent, observed, related, deleting, secret_values);
    let reply = match now {
        Some(now) => guest.call_reconcile_at(&request, now),
        None => guest.call_reconcile(&request),
    };
    let refused = reply.refused;
    let raw = match reply.result {
        Ok(raw) => raw,
        Err(source) => return Err(Error::Call { source, refused }),
    };
    let v = validate::validate(
        Rules {
            description: guest.description(),
            bounds: guest.limits().bounds(),
            parent: ParentScope {
                namespace: Some(&namespace),
                namespaced_children: false,
            },
            protected: &ProtectedObjects::new(),
        },
        raw,
    )?;
    Ok(Rendered {
        contract: guest.contract().package(),
        // What is printed shows no Secret value either.
        children: v
            .children
            .into_iter()
            .map(|c| {
                let mut object = Value::Object(c.object);
                crate::secrets::conceal(&mut object);
                match object {
                    Value::Object(map) => map,
                    _ => Map::new(),
                }
            })
            .collect(),
        status: v.status,
        requeue_after_seconds: v.requeue_after_seconds,
        finalized: v.finalized,
        events: v.events,
        keep: v.keep,
        refused,
    })
}

/// The candidates that map to `parent` under the guest's related kinds, in
/// the controller's order (by kind, then name), stripped, concealed and
/// bounded as the controller's related cache keeps them; a candidate
/// without a namespace is taken to be in the parent's.
fn related_of(
    guest: &Guest,
    parent: &Value,
    namespace: &str,
    candidates: Vec<Value>,
    secret_values: bool,
) -> Result<Vec<Value>, crate::controller::related::RelatedTooLarge> {
    let Ok(mut parent) = serde_json::from_value::<kube::api::DynamicObject>(parent.clone()) else {
        return Ok(Vec::new());
    };
    parent.metadata.namespace = Some(namespace.to_owned());
    let candidates: Vec<kube::api::DynamicObject> = candidates
        .into_iter()
        .filter_map(|c| serde_json::from_value(c).ok())
        .map(|mut c: kube::api::DynamicObject| {
            c.metadata
                .namespace
                .get_or_insert_with(|| namespace.to_owned());
            c
        })
        .collect();
    let mut budget = crate::controller::related::RelatedBudget::new(guest.limits().into());
    let mut out = Vec::new();
    for declared in &guest.description().related {
        for o in crate::controller::related::select(declared, &parent, candidates.iter()) {
            let mut o = o.clone();
            // As the host's metadata-only watch hands it over.
            if declared.metadata_only {
                o.data = Value::Object(Map::new());
            }
            // As the host's related cache keeps it.
            if !secret_values {
                crate::secrets::conceal_object(&mut o);
            }
            // Bounded as `run` bounds it.
            budget.take(&declared.kind, crate::controller::compact::approx_bytes(&o))?;
            if let Ok(value) = serde_json::to_value(o) {
                out.push(value);
            }
        }
    }
    Ok(out)
}
