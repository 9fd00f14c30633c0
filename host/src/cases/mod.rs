//! `wasmop test`: reconcile, admission and conversion cases written as
//! YAML, run against a guest in any language with the host's own sandbox,
//! limits and answer checks (those of `wasmop render`).
//!
//! A case file holds one case per YAML document (the format is an
//! interface contract):
//!
//! ```yaml
//! name: a paused Cache keeps its children
//! parent: {apiVersion: apps.example.com/v1alpha1, kind: Cache, ...}
//! observed: []          # children as the cluster has them
//! related: []           # candidates for the guest's related kinds
//! settings: {}          # overrides --settings
//! deleting: false
//! secretValues: false   # hand the guest Secret values, not their digests
//! now: "2026-01-01T00:00:00Z"   # the host's time; this is the default
//! expect:
//!   children: []        # each must be in the answer (by kind and name) and contain these fields
//!   noOtherChildren: true
//!   keep: []
//!   status: {}          # subset; conditions matched by type
//!   events: [{reason: Paused}]
//!   error: {kind: permanent, message: "..."}
//!   requeueAfterSeconds: 30
//!   finalized: true
//! ```
//!
//! An admission case has `admission: {operation, object, oldObject}` and
//! expects `allowed`, `code`, `message` (a part of it), `warnings` and
//! `object` (the object after the mutating call); a conversion case has
//! `conversion: {to, objects}` and expects `objects`. What "contains"
//! means is in [`matching`].

pub mod matching;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::render::{self, Rendered};
use crate::runtime::{CallError, Guest, Limits, ModuleBytes, Runtime};
use crate::webhook::offline;
use matching::{Difference, contains, plain, show};

/// The host's time a case runs at unless it says `now`: fixed, so that
/// the transition times an answer carries are the same in every run.
pub const DEFAULT_NOW: &str = "2026-01-01T00:00:00Z";

/// One case.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Case {
    /// What the case shows, as a sentence.
    pub name: String,
    /// A reconcile's parent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<Value>,
    /// Observed children.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub observed: Vec<Value>,
    /// Candidates for the related objects.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub related: Vec<Value>,
    /// The guest's settings for this case (instead of `--settings`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<Value>,
    /// The deletion path.
    #[serde(default, skip_serializing_if = "is_false")]
    pub deleting: bool,
    /// Hand the guest Secret values (the guest list's `secretValues`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub secret_values: bool,
    /// The host's time, RFC 3339 (default [`DEFAULT_NOW`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub now: Option<String>,
    /// An admission case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission: Option<AdmissionCase>,
    /// A conversion case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversion: Option<ConversionCase>,
    /// What the answer must show.
    #[serde(default)]
    pub expect: Expect,
}

fn is_false(b: &bool) -> bool {
    !b
}

/// An admission request, as the API server would send it.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AdmissionCase {
    /// CREATE, UPDATE, DELETE or CONNECT.
    pub operation: String,
    /// The object (absent on DELETE).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<Value>,
    /// The object before an UPDATE or DELETE.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_object: Option<Value>,
    /// The user asking (default `wasmop-test`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
}

/// Objects to convert.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConversionCase {
    /// The apiVersion to convert to.
    pub to: String,
    /// The objects, as stored.
    pub objects: Vec<Value>,
}

/// What an answer must show; each field is checked only when present.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Expect {
    /// Children the answer must hold, each found by kind and name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub children: Option<Vec<Value>>,
    /// No child beyond those of `children`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub no_other_children: bool,
    /// Observed children the answer keeps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep: Option<Vec<Value>>,
    /// The status, a subset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Value>,
    /// Events the answer asks for, each a subset of one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<Vec<Value>>,
    /// The requeue the answer asks for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requeue_after_seconds: Option<u32>,
    /// Whether the deletion path is done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finalized: Option<bool>,
    /// A failure instead of an answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ExpectedError>,
    /// Admission: admitted or not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed: Option<bool>,
    /// Admission: a denial's HTTP code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<u16>,
    /// Admission: a part of the denial's message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Admission: warnings, each a part of one the answer gives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warnings: Option<Vec<String>>,
    /// Admission: the object after the mutating call, a subset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<Value>,
    /// Conversion: the converted objects, in order, each a subset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub objects: Option<Vec<Value>>,
}

/// An expected failure.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ExpectedError {
    /// The failure's kind (see [`Failure::kind`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// A part of its message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// What a case asks of the guest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    /// `reconcile`.
    Reconcile,
    /// `admit`, as the mutating and then the validating webhook.
    Admission,
    /// `convert`.
    Conversion,
}

impl Case {
    /// The call the case makes; refuses a case that mixes inputs or
    /// expects what its call cannot answer.
    pub fn call(&self) -> anyhow::Result<Call> {
        let call = match (&self.parent, &self.admission, &self.conversion) {
            (Some(_), None, None) => Call::Reconcile,
            (None, Some(_), None) => Call::Admission,
            (None, None, Some(_)) => Call::Conversion,
            _ => bail!("a case has exactly one of parent, admission and conversion"),
        };
        let e = &self.expect;
        let reconcile = [
            ("children", e.children.is_some()),
            ("noOtherChildren", e.no_other_children),
            ("keep", e.keep.is_some()),
            ("status", e.status.is_some()),
            ("events", e.events.is_some()),
            ("requeueAfterSeconds", e.requeue_after_seconds.is_some()),
            ("finalized", e.finalized.is_some()),
        ];
        let admission = [
            ("allowed", e.allowed.is_some()),
            ("code", e.code.is_some()),
            ("message", e.message.is_some()),
            ("warnings", e.warnings.is_some()),
            ("object", e.object.is_some()),
        ];
        let conversion = [("objects", e.objects.is_some())];
        for (fields, of) in [
            (&reconcile[..], Call::Reconcile),
            (&admission[..], Call::Admission),
            (&conversion[..], Call::Conversion),
        ] {
            if of == call {
                continue;
            }
            if let Some((field, _)) = fields.iter().find(|(_, set)| *set) {
                bail!("expect.{field} is for {} cases", of.noun());
            }
        }
        if call != Call::Reconcile
            && (!self.observed.is_empty() || !self.related.is_empty() || self.deleting)
        {
            bail!("observed, related and deleting are for reconcile cases");
        }
        Ok(call)
    }
}

impl Call {
    fn noun(self) -> &'static str {
        match self {
            Self::Reconcile => "reconcile",
            Self::Admission => "admission",
            Self::Conversion => "conversion",
        }
    }
}

/// A call that failed instead of answering.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// `permanent` or `retryable` (the guest's own error), `timeout`,
    /// `memory-limit`, `trap`, `response-too-large`, `pool-exhausted` (the
    /// sandbox's), `invalid` (the host refused the answer), `refused` (the
    /// guest refused a conversion), `load` (the module or its settings did
    /// not load).
    pub kind: String,
    /// Why.
    pub message: String,
    /// A trap's guest stack, innermost first.
    pub frames: Vec<String>,
}

/// What the guest answered, as a case checks it.
#[derive(Debug)]
pub enum Answer {
    /// A reconcile's answer, as `wasmop render` prints it.
    Reconcile(Box<Rendered>),
    /// The admission verdict.
    Admission(Admitted),
    /// The converted objects.
    Conversion(Vec<Value>),
    /// A failure.
    Failed(Failure),
}

/// The admission answer of both calls.
#[derive(Debug)]
pub struct Admitted {
    /// Both calls admitted.
    pub allowed: bool,
    /// The denial's code.
    pub code: Option<u16>,
    /// The denial's message.
    pub message: String,
    /// Warnings of both calls.
    pub warnings: Vec<String>,
    /// The object after the mutating call's patch, when there was one.
    pub patched: Option<Value>,
}

/// Runs cases against one module, loading it once per distinct settings.
pub struct Runner {
    runtime: Runtime,
    name: String,
    module: ModuleBytes,
    limits: Limits,
    settings: Option<Value>,
    loaded: HashMap<String, Result<Guest, String>>,
}

impl Runner {
    /// A runner for `module` (named `name`), with `settings` for the cases
    /// that name none.
    pub fn new(
        runtime: Runtime,
        name: String,
        module: ModuleBytes,
        limits: Limits,
        settings: Option<Value>,
    ) -> Self {
        Self {
            runtime,
            name,
            module,
            limits,
            settings,
            loaded: HashMap::new(),
        }
    }

    /// The module loaded with `settings`.
    pub fn guest(&mut self, settings: Option<&Value>) -> Result<Guest, String> {
        let settings = settings
            .or(self.settings.as_ref())
            .map(crate::model::json_text);
        let key = settings.clone().unwrap_or_default();
        if let Some(loaded) = self.loaded.get(&key) {
            return loaded.clone();
        }
        let loaded = self
            .runtime
            .load(&self.name, &self.module, self.limits.clone(), settings)
            .map(|(guest, _)| guest)
            .map_err(|e| format!("{e:#}"));
        self.loaded.insert(key, loaded.clone());
        loaded
    }

    /// Runs `case`. An error is a case that cannot run as written.
    pub fn answer(&mut self, case: &Case) -> anyhow::Result<Answer> {
        let call = case.call()?;
        let guest = match self.guest(case.settings.as_ref()) {
            Ok(guest) => guest,
            Err(message) => {
                return Ok(Answer::Failed(Failure {
                    kind: "load".into(),
                    message,
                    frames: Vec::new(),
                }));
            }
        };
        Ok(match call {
            Call::Reconcile => reconcile(&guest, case)?,
            Call::Admission => admission(&guest, case.admission.as_ref().context("admission")?)?,
            Call::Conversion => {
                let conversion = case.conversion.as_ref().context("conversion")?;
                match offline::convert(&guest, &conversion.objects, &conversion.to) {
                    Ok(objects) => Answer::Conversion(objects),
                    Err(e) => Answer::Failed(failure(&e)),
                }
            }
        })
    }
}

fn reconcile(guest: &Guest, case: &Case) -> anyhow::Result<Answer> {
    let now = case.now.as_deref().unwrap_or(DEFAULT_NOW);
    let now = time::OffsetDateTime::parse(now, &time::format_description::well_known::Rfc3339)
        .with_context(|| format!("now: {now:?} is not an RFC 3339 time"))?;
    let now = u64::try_from(now.unix_timestamp()).context("now: before 1970")?;
    let parent = case.parent.clone().context("parent")?;
    let inputs = render::Inputs {
        observed: case.observed.clone(),
        related: case.related.clone(),
        deleting: case.deleting,
        secret_values: case.secret_values,
        now: Some(now),
    };
    Ok(match render::render(guest, parent, inputs) {
        Ok(rendered) => Answer::Reconcile(Box::new(rendered)),
        Err(e @ (render::Error::BadParent | render::Error::WrongKind { .. })) => {
            bail!("parent: {e}")
        }
        Err(render::Error::RelatedTooLarge(e)) => bail!("related: {e}"),
        Err(render::Error::Call { source, refused }) => {
            let mut f = call_failure(&source);
            if !refused.is_empty() {
                f.message = format!("{}; refused: {}", f.message, refused.join("; "));
            }
            Answer::Failed(f)
        }
        Err(render::Error::Invalid(violation)) => Answer::Failed(Failure {
            kind: "invalid".into(),
            message: violation.to_string(),
            frames: Vec::new(),
        }),
    })
}

fn admission(guest: &Guest, case: &AdmissionCase) -> anyhow::Result<Answer> {
    let object = case
        .object
        .as_ref()
        .or(case.old_object.as_ref())
        .context("admission: an object or an oldObject")?;
    let (api_version, kind) = (
        object["apiVersion"].as_str().unwrap_or_default(),
        object["kind"].as_str().unwrap_or_default(),
    );
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    if version.is_empty() || kind.is_empty() {
        bail!("admission: the object has no apiVersion or kind");
    }
    let resource =
        kube::core::ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk(group, version, kind))
            .plural;
    let mut request = json!({
        "uid": "00000000-0000-4000-8000-000000000000",
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": resource},
        "name": object["metadata"]["name"],
        "namespace": object["metadata"]["namespace"].as_str().unwrap_or("default"),
        "operation": case.operation,
        "userInfo": {"username": case.username.as_deref().unwrap_or("wasmop-test")},
        "dryRun": false,
    });
    for (key, value) in [("object", &case.object), ("oldObject", &case.old_object)] {
        if let Some(value) = value {
            request[key] = value.clone();
        }
    }
    let review =
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request});
    let admitted = match offline::admit(guest, review) {
        Ok(admitted) => admitted,
        Err(e) => return Ok(Answer::Failed(failure(&e))),
    };
    let denial = if admitted.mutating.allowed {
        admitted.validating.as_ref()
    } else {
        Some(&admitted.mutating)
    };
    let denial = denial.filter(|v| !v.allowed);
    let mut warnings = admitted.mutating.warnings.clone();
    warnings.extend(admitted.validating.iter().flat_map(|v| v.warnings.clone()));
    Ok(Answer::Admission(Admitted {
        allowed: denial.is_none(),
        code: denial.and_then(|d| d.code),
        message: denial.map(|d| d.message.clone()).unwrap_or_default(),
        warnings,
        patched: admitted
            .mutating
            .patch
            .is_some()
            .then_some(admitted.object)
            .flatten(),
    }))
}

/// The failure `error` reports, by the first cause that says what failed.
fn failure(error: &anyhow::Error) -> Failure {
    for cause in error.chain() {
        if let Some(call) = cause.downcast_ref::<CallError>() {
            return call_failure(call);
        }
        if let Some(offline::Refused(message)) = cause.downcast_ref::<offline::Refused>() {
            return Failure {
                kind: "refused".into(),
                message: message.clone(),
                frames: Vec::new(),
            };
        }
    }
    Failure {
        kind: "invalid".into(),
        message: format!("{error:#}"),
        frames: Vec::new(),
    }
}

fn call_failure(error: &CallError) -> Failure {
    let kind = match error {
        CallError::Guest(e) => {
            return Failure {
                kind: e.kind.to_string(),
                message: e.message.clone(),
                frames: Vec::new(),
            };
        }
        CallError::Timeout(_) => "timeout",
        CallError::MemoryLimit(_) => "memory-limit",
        CallError::Trap { .. } => "trap",
        CallError::ResponseTooLarge { .. } | CallError::CopyLimit { .. } => "response-too-large",
        CallError::PoolExhausted(_) => "pool-exhausted",
    };
    Failure {
        kind: kind.into(),
        message: error.to_string(),
        frames: error.frames().to_vec(),
    }
}

/// Checks `answer` against `expect`; the first difference, if any.
pub fn check(expect: &Expect, answer: &Answer) -> Result<(), Difference> {
    let failed = match answer {
        Answer::Failed(failure) => Some(failure),
        _ => None,
    };
    match (&expect.error, failed) {
        (Some(want), Some(have)) => {
            if let Some(kind) = want.kind.as_deref().filter(|k| *k != have.kind) {
                return Err(Difference::new("error.kind", kind, &have.kind));
            }
            if let Some(part) = want
                .message
                .as_deref()
                .filter(|p| !have.message.contains(p))
            {
                return Err(Difference::new(
                    "error.message",
                    format!("a message containing {part:?}"),
                    format!("{:?}", have.message),
                ));
            }
            return Ok(());
        }
        (Some(want), None) => {
            return Err(Difference::new(
                "error",
                match want.kind.as_deref() {
                    Some(kind) => format!("a {kind} failure"),
                    None => "a failure".to_owned(),
                },
                "an answer",
            ));
        }
        (None, Some(have)) => {
            return Err(Difference::new(
                "error",
                "an answer",
                format!("{}: {}", have.kind, have.message),
            ));
        }
        (None, None) => {}
    }
    match answer {
        Answer::Reconcile(rendered) => check_reconcile(expect, rendered),
        Answer::Admission(admitted) => check_admission(expect, admitted),
        Answer::Conversion(objects) => match &expect.objects {
            Some(want) => contains(
                "objects",
                &Value::from(want.clone()),
                &Value::from(objects.clone()),
            ),
            None => Ok(()),
        },
        Answer::Failed(_) => Ok(()),
    }
}

/// A child's identity in a path: `Kind/name`, with the apiVersion when the
/// expectation gives one.
fn identity(child: &Value) -> Option<(Option<&str>, &str, &str)> {
    Some((
        child["apiVersion"].as_str(),
        child["kind"].as_str()?,
        child["metadata"]["name"].as_str()?,
    ))
}

fn check_reconcile(expect: &Expect, rendered: &Rendered) -> Result<(), Difference> {
    let children: Vec<Value> = rendered
        .children
        .iter()
        .cloned()
        .map(Value::Object)
        .collect();
    let mut matched = vec![false; children.len()];
    for want in expect.children.iter().flatten() {
        let Some((api_version, kind, name)) = identity(want) else {
            return Err(Difference::new(
                "expect.children",
                "each child with kind and metadata.name",
                show(want),
            ));
        };
        let path = format!("children[{kind}/{name}]");
        let found = children.iter().position(|have| {
            identity(have).is_some_and(|(v, k, n)| {
                k == kind && n == name && api_version.is_none_or(|want| v == Some(want))
            })
        });
        let Some(i) = found else {
            let present: Vec<String> = children
                .iter()
                .filter_map(identity)
                .map(|(_, k, n)| format!("{k}/{n}"))
                .collect();
            return Err(Difference::new(
                path,
                "the child",
                format!("nothing (children: [{}])", present.join(", ")),
            ));
        };
        matched[i] = true;
        contains(&path, want, &children[i])?;
    }
    if expect.no_other_children
        && let Some(i) = matched.iter().position(|m| !m)
    {
        let (_, kind, name) = identity(&children[i]).unwrap_or((None, "?", "?"));
        return Err(Difference::new(
            format!("children[{kind}/{name}]"),
            "no such child (noOtherChildren)",
            "one",
        ));
    }
    if let Some(want) = &expect.keep {
        let have = serde_json::to_value(&rendered.keep).unwrap_or_default();
        for item in want {
            let have = have.as_array().map(Vec::as_slice).unwrap_or_default();
            if !have.iter().any(|h| contains("", item, h).is_ok()) {
                return Err(Difference::new(
                    "keep",
                    show(item),
                    show(&Value::from(have.to_vec())),
                ));
            }
        }
    }
    if let Some(want) = &expect.status {
        let have = rendered.status.clone().map_or(Value::Null, Value::Object);
        contains("status", want, &have)?;
    }
    if let Some(want) = &expect.events {
        let have: Vec<Value> = rendered
            .events
            .iter()
            .filter_map(|e| serde_json::to_value(e).ok())
            .collect();
        for event in want {
            if have.iter().any(|h| contains("", event, h).is_ok()) {
                continue;
            }
            let same_reason = have.iter().find(|h| h.get("reason") == event.get("reason"));
            return Err(match same_reason {
                Some(h) => {
                    let path = format!("events[reason={}]", plain(&event["reason"]));
                    contains(&path, event, h)
                        .err()
                        .unwrap_or_else(|| Difference::new(path, show(event), show(h)))
                }
                None => Difference::new(
                    "events",
                    show(event),
                    format!(
                        "reasons [{}]",
                        have.iter()
                            .map(|h| plain(&h["reason"]))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ),
            });
        }
    }
    if let Some(want) = expect.requeue_after_seconds
        && rendered.requeue_after_seconds != Some(want)
    {
        return Err(Difference::new(
            "requeueAfterSeconds",
            want.to_string(),
            rendered
                .requeue_after_seconds
                .map_or_else(|| "nothing".into(), |s| s.to_string()),
        ));
    }
    if let Some(want) = expect.finalized
        && rendered.finalized != want
    {
        return Err(Difference::new(
            "finalized",
            want.to_string(),
            rendered.finalized.to_string(),
        ));
    }
    Ok(())
}

fn check_admission(expect: &Expect, admitted: &Admitted) -> Result<(), Difference> {
    if let Some(want) = expect.allowed
        && want != admitted.allowed
    {
        return Err(Difference::new(
            "allowed",
            want.to_string(),
            format!("{} ({:?})", admitted.allowed, admitted.message),
        ));
    }
    if let Some(want) = expect.code
        && admitted.code != Some(want)
    {
        return Err(Difference::new(
            "code",
            want.to_string(),
            admitted
                .code
                .map_or_else(|| "nothing".into(), |c| c.to_string()),
        ));
    }
    if let Some(part) = expect
        .message
        .as_deref()
        .filter(|p| !admitted.message.contains(p))
    {
        return Err(Difference::new(
            "message",
            format!("a message containing {part:?}"),
            format!("{:?}", admitted.message),
        ));
    }
    for part in expect.warnings.iter().flatten() {
        if !admitted.warnings.iter().any(|w| w.contains(part.as_str())) {
            return Err(Difference::new(
                "warnings",
                format!("a warning containing {part:?}"),
                format!("{:?}", admitted.warnings),
            ));
        }
    }
    if let Some(want) = &expect.object {
        let have = admitted.patched.clone().unwrap_or(Value::Null);
        contains("object", want, &have)?;
    }
    Ok(())
}

/// The expectation that `answer` meets in full (`wasmop test --update`).
pub fn expectation(case: &Case, answer: &Answer) -> Expect {
    match answer {
        Answer::Failed(f) => Expect {
            error: Some(ExpectedError {
                kind: Some(f.kind.clone()),
                message: Some(f.message.clone()),
            }),
            ..Expect::default()
        },
        Answer::Reconcile(r) => Expect {
            children: Some(r.children.iter().cloned().map(Value::Object).collect()),
            no_other_children: true,
            keep: (!r.keep.is_empty()).then(|| {
                r.keep
                    .iter()
                    .filter_map(|k| serde_json::to_value(k).ok())
                    .collect()
            }),
            status: r.status.clone().map(Value::Object),
            events: (!r.events.is_empty()).then(|| {
                r.events
                    .iter()
                    .filter_map(|e| serde_json::to_value(e).ok())
                    .collect()
            }),
            requeue_after_seconds: r.requeue_after_seconds,
            finalized: (case.deleting || r.finalized).then_some(r.finalized),
            ..Expect::default()
        },
        Answer::Admission(a) => Expect {
            allowed: Some(a.allowed),
            code: a.code,
            message: (!a.message.is_empty()).then(|| a.message.clone()),
            warnings: (!a.warnings.is_empty()).then(|| a.warnings.clone()),
            object: a.patched.clone(),
            ..Expect::default()
        },
        Answer::Conversion(objects) => Expect {
            objects: Some(objects.clone()),
            ..Expect::default()
        },
    }
}

/// A case file: its path and each document, parsed or not.
#[derive(Debug)]
pub struct CaseFile {
    /// Where it is.
    pub path: PathBuf,
    /// Its cases, in order; a document that is not a case is its error.
    pub cases: Vec<Result<Case, String>>,
}

/// The case files `paths` name: files as they are, directories by their
/// `.yaml` and `.yml` files, recursively, in name order.
pub fn files(paths: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for path in paths {
        if path.is_dir() {
            let mut found = Vec::new();
            collect(path, &mut found)?;
            found.sort();
            if found.is_empty() {
                bail!("{}: no .yaml or .yml case files", path.display());
            }
            out.extend(found);
        } else if path.exists() {
            out.push(path.clone());
        } else {
            bail!("{}: no such file or directory", path.display());
        }
    }
    Ok(out)
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            collect(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(path);
        }
    }
    Ok(())
}

/// Reads the cases of `path`; a file that is not YAML is an error.
pub fn read(path: &Path) -> anyhow::Result<CaseFile> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text)
        .with_context(|| format!("parsing {}", path.display()))?;
    let cases = docs
        .into_iter()
        .filter(|doc| !doc.is_null())
        .enumerate()
        .map(|(i, doc)| {
            serde_json::from_value::<Case>(doc)
                .map_err(|e| format!("document {}: not a case: {e}", i + 1))
        })
        .collect();
    Ok(CaseFile {
        path: path.to_owned(),
        cases,
    })
}

/// `cases` as a YAML file, one document each.
pub fn write(cases: &[Case]) -> anyhow::Result<String> {
    let mut out = String::new();
    for (i, case) in cases.iter().enumerate() {
        if i > 0 {
            out.push_str("---\n");
        }
        out.push_str(&serde_saphyr::to_string(case)?);
    }
    Ok(out)
}
