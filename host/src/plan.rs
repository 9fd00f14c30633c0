//! `wasmop plan`: a new module version run against the live cluster,
//! read-only.
//!
//! For every parent of the guest's primary kind, the plan gathers what the
//! host would hand the guest (the observed children it declares, the
//! related objects that map to the parent, concealed as the host conceals
//! them), reconciles with the new module offline under the host's limits
//! and validation, and tells what would change: children to create, to
//! delete and to change, the status fields that would change, the Events
//! the answer asks for, or why the answer would fail. A child whose desired
//! form differs from the live one by the host's own drift check is applied
//! as a server-side-apply dry run (`dryRun=All`, the guest's field
//! manager), and only the fields that run would change are shown, so server
//! defaults and other managers' fields never show as changes; a child to
//! create is a dry-run create, so a taken name or an invalid object shows
//! as a failure. The guest's outbound requests are refused. Nothing is
//! written.
//!
//! What the host would write is decided by the reconcile's own plan stage
//! ([`crate::controller::reconcile::plan`]): the same stamping, drift check,
//! `keep` and prunes. The requests go out with the client the host would
//! use for the guest: its User-Agent and, under per-guest identity, its
//! ServiceAccount, so a write its roles forbid plans as a failure.
//!
//! A plan is bounded whatever the guest answers: each value shown is cut to
//! [`diff::MAX_VALUE_BYTES`], at most [`MAX_FIELDS_PER_PARENT`] changed
//! fields are listed for a parent, each failure is cut to
//! [`MAX_ERROR_BYTES`], and once [`MAX_DETAIL_BYTES`] of details are held
//! the parents that follow keep their verdict alone; what is left out is
//! counted and said.

use std::collections::HashMap;
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde::Serialize;
use serde_json::Value;

use crate::controller::apply;
use crate::controller::discovery::{self, ResolvedKind};
use crate::controller::index::controller_uid;
use crate::controller::reconcile::gather;
use crate::controller::reconcile::plan;
use crate::model::{Description, Event};
use crate::protected::ProtectedObjects;
use crate::rollout::diff::{self, Change};
use crate::runtime::Guest;
use crate::validate::{self, GUEST_LABEL, ParentScope, Rules};
use wasmop_contract::names::field_manager;

/// Guest calls of a plan that run at once.
const CALLS_AT_ONCE: usize = 4;
/// Dry-run applies of a plan in flight at once.
const DRY_RUNS_AT_ONCE: usize = 8;

/// Changed fields listed for one parent at most (its children's and its
/// status'); the rest are counted.
pub const MAX_FIELDS_PER_PARENT: usize = 100;

/// The longest failure a parent's plan quotes.
pub const MAX_ERROR_BYTES: usize = 1024;

/// Details (changed fields, Events) a whole plan holds at most, as JSON
/// text; the parents planned after that keep their verdict alone.
pub const MAX_DETAIL_BYTES: usize = 4 << 20;

/// Why a plan could not be made (a parent's failure is part of the plan).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The new module's kinds cannot be served.
    #[error(transparent)]
    Discovery(#[from] discovery::Error),
    /// Listing objects failed.
    #[error("listing {kind}: {source}")]
    List {
        /// The kind.
        kind: String,
        /// The API error.
        source: kube::Error,
    },
    /// A guest call task failed.
    #[error("guest task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
}

/// What the plan looks at.
pub struct Inputs<'a> {
    /// The guest's name: its children carry it in their label, and its
    /// field manager is `wasmop-<name>`.
    pub name: &'a str,
    /// The new module version.
    pub guest: &'a Guest,
    /// Kinds the running version declares besides: their children are
    /// deleted unless the new version wants them.
    pub running: Option<&'a Description>,
    /// Namespaces to look in; empty: all.
    pub namespaces: &'a [String],
    /// Hand the guest Secret values (the entry's `secretValues`).
    pub secret_values: bool,
    /// Objects no guest may write.
    pub protected: &'a ProtectedObjects,
    /// The host's own namespace (the guest list's), where no object is
    /// related.
    pub host_namespace: Option<&'a str>,
}

/// How a parent would fare.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Verdict {
    /// Nothing would change.
    Unchanged,
    /// Something would change.
    Change,
    /// The reconcile would fail.
    Fail,
}

/// A child named in a plan.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChildRef {
    /// Its apiVersion.
    pub api_version: String,
    /// Its kind.
    pub kind: String,
    /// Its name.
    pub name: String,
}

/// A child that would change, field by field.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChildChange {
    /// Which child.
    #[serde(flatten)]
    pub child: ChildRef,
    /// The fields the dry run changed.
    pub fields: Vec<Change>,
}

/// One parent's plan.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ParentPlan {
    /// The parent's namespace (none when cluster-scoped).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
    /// How it would fare.
    pub result: Verdict,
    /// Children that would be created.
    pub create: Vec<ChildRef>,
    /// Children that would be deleted.
    pub delete: Vec<ChildRef>,
    /// Children that would change.
    pub change: Vec<ChildChange>,
    /// Status fields that would change.
    pub status: Vec<Change>,
    /// Events the answer asks for.
    pub events: Vec<Event>,
    /// Why the reconcile would fail.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Changed fields and Events not listed (the plan's bounds).
    #[serde(skip_serializing_if = "is_zero")]
    pub left_out: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The counts of a plan.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Parents planned.
    pub parents: usize,
    /// Parents where nothing would change.
    pub unchanged: usize,
    /// Parents where something would.
    pub change: usize,
    /// Parents whose reconcile would fail.
    pub fail: usize,
    /// Changed fields and Events the plan does not list (its bounds); not
    /// written when none is left out, so a plan within its bounds reads as
    /// it always did.
    #[serde(skip_serializing_if = "is_zero")]
    pub left_out: usize,
}

/// A whole plan (`wasmop plan -o json`).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// The primary kind, `group/version, Kind=…`.
    pub kind: String,
    /// Every parent, by namespace and name.
    pub parents: Vec<ParentPlan>,
    /// The counts.
    pub summary: Summary,
}

impl Plan {
    /// The plan's last line (interface contract).
    pub fn summary_line(&self) -> String {
        let s = self.summary;
        format!(
            "plan: {} parents: {} unchanged, {} would change, {} would fail",
            s.parents, s.unchanged, s.change, s.fail
        )
    }

    /// The plan for people: each parent that would change or fail, then
    /// the summary line.
    pub fn text(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        for p in self
            .parents
            .iter()
            .filter(|p| p.result != Verdict::Unchanged)
        {
            let at = match &p.namespace {
                Some(ns) => format!("{ns}/{}", p.name),
                None => p.name.clone(),
            };
            match &p.error {
                Some(error) => {
                    let _ = writeln!(out, "{} {at}: would fail: {error}", self.kind);
                    continue;
                }
                None => {
                    let _ = writeln!(out, "{} {at}: would change", self.kind);
                }
            }
            for c in &p.create {
                let _ = writeln!(out, "  + create {} {}", c.kind, c.name);
            }
            for c in &p.change {
                let _ = writeln!(out, "  ~ change {} {}", c.child.kind, c.child.name);
                for field in &c.fields {
                    let _ = writeln!(out, "      {field}");
                }
            }
            for c in &p.delete {
                let _ = writeln!(out, "  - delete {} {}", c.kind, c.name);
            }
            for field in &p.status {
                let _ = writeln!(out, "  ~ status {field}");
            }
            for e in &p.events {
                let _ = writeln!(
                    out,
                    "  ! event {:?} {}: {}",
                    e.event_type, e.reason, e.message
                );
            }
        }
        if self.summary.left_out > 0 {
            let _ = writeln!(
                out,
                "plan: {} changed fields and Events are left out (at most {MAX_FIELDS_PER_PARENT} fields a parent, {} bytes a value, {} MiB of details in all)",
                self.summary.left_out,
                diff::MAX_VALUE_BYTES,
                MAX_DETAIL_BYTES >> 20
            );
        }
        out.push_str(&self.summary_line());
        out.push('\n');
        out
    }
}

/// Makes the plan.
pub async fn plan(client: &Client, inputs: Inputs<'_>) -> Result<Plan, Error> {
    let description = inputs.guest.description().clone();
    let mut watched = description.clone();
    if let Some(running) = inputs.running {
        for child in &running.children {
            if !watched
                .children
                .iter()
                .any(|c| c.kind.same_resource(&child.kind))
            {
                watched.children.push(child.clone());
            }
        }
    }
    let kinds = discovery::resolve(client, &watched).await?;
    let scopes: Vec<Option<&str>> = if inputs.namespaces.is_empty() || !kinds.primary.namespaced {
        vec![None]
    } else {
        inputs.namespaces.iter().map(|n| Some(n.as_str())).collect()
    };
    let mut parents = Vec::new();
    for scope in &scopes {
        let mut listed = list(client, &kinds.primary, *scope, None).await?;
        // As a guest of every namespace leaves out the host's.
        if let (None, Some(host)) = (scope, inputs.host_namespace) {
            listed.retain(|p| p.metadata.namespace.as_deref() != Some(host));
        }
        parents.extend(listed);
    }
    parents.sort_by_key(|p| (p.namespace(), p.name_any()));
    // Children by their controller's uid.
    let selector = format!("{GUEST_LABEL}={}", inputs.name);
    // A cluster-scoped kind is listed once, whatever the namespaces.
    let scopes_of = |kind: &ResolvedKind| -> Vec<Option<&str>> {
        if kind.namespaced {
            scopes.clone()
        } else {
            vec![None]
        }
    };
    let mut children: HashMap<String, Vec<(usize, DynamicObject)>> = HashMap::new();
    for (i, kind) in kinds.children.iter().enumerate() {
        for scope in &scopes_of(kind) {
            for child in list(client, kind, *scope, Some(&selector)).await? {
                if let Some(uid) = controller_uid(&child) {
                    children.entry(uid.to_owned()).or_default().push((i, child));
                }
            }
        }
    }
    let mut related = Vec::new();
    for (kind, declared) in &kinds.related {
        for scope in &scopes_of(kind) {
            let mut objects = list(client, kind, *scope, None).await?;
            // As the host's related watches leave it out.
            objects.retain(|o| o.metadata.namespace.as_deref() != inputs.host_namespace);
            for object in &mut objects {
                if declared.metadata_only {
                    object.data = Value::Object(Default::default());
                }
                if !inputs.secret_values {
                    crate::secrets::conceal_object(object);
                }
            }
            related.extend(objects.into_iter().map(|o| (declared.clone(), o)));
        }
    }
    let ctx = Arc::new(Shared {
        guest: inputs.guest.clone(),
        kinds: kinds.children.clone(),
        name: inputs.name.to_owned(),
        manager: field_manager(inputs.name),
        primary: kinds.primary.clone(),
        status_schema: kinds.status_schema.clone(),
        secret_values: inputs.secret_values,
        protected: inputs.protected.clone(),
        client: client.clone(),
        budget: std::sync::atomic::AtomicUsize::new(MAX_DETAIL_BYTES),
    });
    let related = Arc::new(related);
    let planned: Vec<ParentPlan> = futures::stream::iter(parents.into_iter().map(|parent| {
        let observed = children
            .remove(&parent.uid().unwrap_or_default())
            .unwrap_or_default();
        let (ctx, related) = (ctx.clone(), related.clone());
        async move { plan_parent(ctx, parent, observed, related).await }
    }))
    .buffered(CALLS_AT_ONCE)
    .try_collect()
    .await?;
    let mut summary = Summary {
        parents: planned.len(),
        ..Summary::default()
    };
    for p in &planned {
        summary.left_out += p.left_out;
        match p.result {
            Verdict::Unchanged => summary.unchanged += 1,
            Verdict::Change => summary.change += 1,
            Verdict::Fail => summary.fail += 1,
        }
    }
    let primary = &kinds.primary.resource;
    Ok(Plan {
        kind: primary.kind.clone(),
        parents: planned,
        summary,
    })
}

struct Shared {
    guest: Guest,
    kinds: Vec<ResolvedKind>,
    name: String,
    manager: String,
    primary: ResolvedKind,
    /// The schema of the primary's `.status` (see `status::plan`).
    status_schema: Option<Arc<serde_json::Value>>,
    secret_values: bool,
    protected: ProtectedObjects,
    client: Client,
    /// Bytes of details the plan may still hold.
    budget: std::sync::atomic::AtomicUsize,
}

/// Every object of `kind` in `namespace` (all: `None`), with its
/// apiVersion and kind filled in and managedFields dropped.
async fn list(
    client: &Client,
    kind: &ResolvedKind,
    namespace: Option<&str>,
    selector: Option<&str>,
) -> Result<Vec<DynamicObject>, Error> {
    let api: Api<DynamicObject> = match namespace {
        Some(ns) if kind.namespaced => Api::namespaced_with(client.clone(), ns, &kind.resource),
        _ => Api::all_with(client.clone(), &kind.resource),
    };
    let mut params = ListParams::default();
    if let Some(selector) = selector {
        params = params.labels(selector);
    }
    let items = api
        .list(&params)
        .await
        .map_err(|source| Error::List {
            kind: kind.kind.to_string(),
            source,
        })?
        .items;
    Ok(items
        .into_iter()
        .map(|mut o| {
            o.types.get_or_insert_with(|| kube::core::TypeMeta {
                api_version: kind.resource.api_version.clone(),
                kind: kind.resource.kind.clone(),
            });
            o.metadata.managed_fields = None;
            o
        })
        .collect())
}

fn child_ref(o: &DynamicObject) -> ChildRef {
    let types = o.types.clone().unwrap_or_default();
    ChildRef {
        api_version: types.api_version,
        kind: types.kind,
        name: o.name_any(),
    }
}

async fn plan_parent(
    ctx: Arc<Shared>,
    parent: DynamicObject,
    observed: Vec<(usize, DynamicObject)>,
    related: Arc<Vec<(crate::model::RelatedKind, DynamicObject)>>,
) -> Result<ParentPlan, Error> {
    let description = ctx.guest.description();
    let declared = |kind: usize| {
        description
            .children
            .iter()
            .any(|c| c.kind.same_resource(&ctx.kinds[kind].kind))
    };
    let mut budget = crate::controller::related::RelatedBudget::new(ctx.guest.limits().into());
    let mut too_large = None;
    let mut shown = Vec::new();
    'kinds: for declared in &description.related {
        let candidates = related
            .iter()
            .filter(|(d, _)| d == declared)
            .map(|(_, o)| o);
        for object in crate::controller::related::select(declared, &parent, candidates) {
            // Bounded as the host bounds a request.
            let bytes = crate::controller::compact::approx_bytes(object);
            if let Err(e) = budget.take(&declared.kind, bytes) {
                too_large = Some(e);
                break 'kinds;
            }
            shown.push(object);
        }
    }
    let request = gather::request(
        gather::value(&parent),
        observed
            .iter()
            .filter(|(k, _)| declared(*k))
            .map(|(_, o)| gather::value(o)),
        shown.into_iter().map(gather::value),
        parent.metadata.deletion_timestamp.is_some(),
        ctx.secret_values,
    );
    let mut planned = ParentPlan {
        namespace: parent.namespace(),
        name: parent.name_any(),
        result: Verdict::Unchanged,
        create: Vec::new(),
        delete: Vec::new(),
        change: Vec::new(),
        status: Vec::new(),
        events: Vec::new(),
        error: None,
        left_out: 0,
    };
    if let Some(e) = too_large {
        planned.result = Verdict::Fail;
        planned.error = Some(cut_error(format!(
            "{}: {e}",
            wasmop_contract::Reason::RelatedTooLarge
        )));
        return Ok(planned);
    }
    let guest = ctx.guest.clone();
    let now = crate::runtime::guest::now();
    // A plan reaches nothing outside: the guest's outbound requests are
    // refused.
    let reply =
        tokio::task::spawn_blocking(move || guest.call_reconcile_offline(&request, now)).await?;
    let decoration = reply.decoration;
    let answer = reply
        .result
        .map_err(|e| format!("{}: {e}", e.reason()))
        .and_then(|raw| {
            validate::validate(
                Rules {
                    description,
                    bounds: ctx.guest.limits().bounds(),
                    parent: ParentScope {
                        namespace: parent.metadata.namespace.as_deref(),
                        namespaced_children: ctx.guest.follows_metacontroller(),
                    },
                    protected: &ctx.protected,
                },
                raw,
            )
            .map_err(|v| {
                format!(
                    "{}: invalid guest response, nothing would be applied: {v}",
                    v.reason()
                )
            })
        });
    let answer = match answer {
        Ok(answer) => answer,
        Err(error) => {
            planned.result = Verdict::Fail;
            planned.error = Some(cut_error(error));
            return Ok(planned);
        }
    };
    let observed: Vec<(usize, Arc<DynamicObject>)> = observed
        .into_iter()
        .map(|(kind, o)| (kind, Arc::new(o)))
        .collect();
    let steps = plan::plan(
        plan::Inputs {
            parent: &parent,
            primary: &ctx.primary.resource,
            children: &ctx.kinds,
            guest: &ctx.name,
            // The shard label is outside the desired hash and a plan
            // compares what the guest's answer changes.
            shard: None,
            observed: &observed,
            strategies: ctx.guest.update_strategies(),
            status_schema: crate::controller::status::schema_for(
                &ctx.guest,
                ctx.status_schema.as_deref(),
            ),
            decoration: decoration.as_ref(),
        },
        &answer,
        &crate::controller::status::now_rfc3339(),
    )
    .steps;
    let mut fields = Fields::new(&ctx.budget);
    dry_run_steps(&ctx, steps, &mut planned, &mut fields).await;
    let (now, then) = crate::controller::status::status_change(&parent, answer.status.as_ref());
    // A parent without a status yet gets each field listed as added, not
    // the whole status as one value.
    let now = match (now, &then) {
        (Value::Null, Value::Object(_)) => Value::Object(serde_json::Map::new()),
        (now, _) => now,
    };
    planned.status = fields.changes(&now, &then);
    for event in answer.events {
        if fields.take(event.reason.len() + event.message.len()) {
            planned.events.push(event);
        } else {
            fields.left_out += 1;
        }
    }
    planned.left_out = fields.left_out;
    let changes = !planned.create.is_empty()
        || !planned.delete.is_empty()
        || !planned.change.is_empty()
        || !planned.status.is_empty()
        || planned.left_out > 0;
    if planned.error.is_some() {
        planned.result = Verdict::Fail;
    } else if changes {
        planned.result = Verdict::Change;
    }
    Ok(planned)
}

/// `error` cut to [`MAX_ERROR_BYTES`].
fn cut_error(error: String) -> String {
    crate::sink::cut(&error, MAX_ERROR_BYTES).into_owned()
}

/// The changed fields one parent's plan may still list: at most
/// [`MAX_FIELDS_PER_PARENT`] of its own, within what the whole plan may
/// still hold.
struct Fields<'a> {
    listed: usize,
    left_out: usize,
    budget: &'a std::sync::atomic::AtomicUsize,
}

impl<'a> Fields<'a> {
    fn new(budget: &'a std::sync::atomic::AtomicUsize) -> Self {
        Self {
            listed: 0,
            left_out: 0,
            budget,
        }
    }

    /// Takes `bytes` of the plan's budget for one more detail; `false`
    /// when the parent or the plan holds no more.
    fn take(&mut self, bytes: usize) -> bool {
        use std::sync::atomic::Ordering;
        if self.listed >= MAX_FIELDS_PER_PARENT {
            return false;
        }
        let taken = self
            .budget
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| {
                left.checked_sub(bytes)
            })
            .is_ok();
        if taken {
            self.listed += 1;
        }
        taken
    }

    /// The changed fields between `before` and `after` this parent may
    /// still list; the others counted as left out.
    fn changes(&mut self, before: &Value, after: &Value) -> Vec<Change> {
        let room = MAX_FIELDS_PER_PARENT.saturating_sub(self.listed);
        let (found, more) = diff::changes_bounded(before, after, room);
        self.left_out += more;
        let mut listed = Vec::new();
        for change in found {
            let bytes = change.path.len()
                + change.before.as_ref().map_or(0, |v| v.to_string().len())
                + change.after.as_ref().map_or(0, |v| v.to_string().len());
            if self.take(bytes) {
                listed.push(change);
            } else {
                self.left_out += 1;
            }
        }
        listed
    }
}

/// Dry-runs the writes `steps` plans: a create or an apply as the host
/// would send it, and the deletes; fills in the children to create,
/// change and delete, and the first refusal.
async fn dry_run_steps(
    ctx: &Shared,
    steps: Vec<plan::Step<'_>>,
    planned: &mut ParentPlan,
    fields: &mut Fields<'_>,
) {
    let mut dry_runs = Vec::new();
    let mut creates = Vec::new();
    for step in steps {
        match step {
            plan::Step::Write {
                kind,
                stamped,
                observed,
                namespace,
                ..
            } => {
                let reference = ChildRef {
                    api_version: ctx.kinds[kind].resource.api_version.clone(),
                    kind: ctx.kinds[kind].resource.kind.clone(),
                    name: stamped["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                };
                let namespace = namespace.map(str::to_owned);
                match observed {
                    None => creates.push((reference, kind, namespace, stamped)),
                    Some(live) => dry_runs.push((reference, kind, namespace, stamped, live)),
                }
            }
            plan::Step::Prune { child, .. } => planned.delete.push(child_ref(&child)),
        }
    }
    // A create runs as a dry run too: a name taken, a protected or an
    // invalid object would fail.
    let created: Vec<_> = futures::stream::iter(creates.into_iter().map(
        |(reference, kind, namespace, stamped)| async move {
            let result = dry_create(ctx, kind, namespace.as_deref(), &stamped).await;
            (reference, result)
        },
    ))
    .buffered(DRY_RUNS_AT_ONCE)
    .collect()
    .await;
    for (reference, result) in created {
        match result {
            Ok(_) => planned.create.push(reference),
            Err(e) => {
                planned.error.get_or_insert_with(|| {
                    cut_error(format!(
                        "ApplyFailed: the dry run of creating {} {} was refused: {e}",
                        reference.kind, reference.name
                    ))
                });
            }
        }
    }
    let results: Vec<_> = futures::stream::iter(dry_runs.into_iter().map(
        |(reference, kind, namespace, stamped, live)| async move {
            let result = dry_run(ctx, kind, namespace.as_deref(), &stamped, &live).await;
            (reference, live, result)
        },
    ))
    .buffered(DRY_RUNS_AT_ONCE)
    .collect()
    .await;
    for (reference, live, result) in results {
        match result {
            Ok(applied) => {
                let changed = fields.changes(&comparable(&live), &comparable(&applied));
                if !changed.is_empty() {
                    let changed = if reference.kind == "Secret" {
                        changed
                            .into_iter()
                            .map(|c| Change {
                                path: c.path,
                                before: None,
                                after: None,
                            })
                            .collect()
                    } else {
                        changed
                    };
                    planned.change.push(ChildChange {
                        child: reference,
                        fields: changed,
                    });
                }
            }
            Err(e) => {
                planned.error.get_or_insert_with(|| {
                    cut_error(format!(
                        "ApplyFailed: the dry run of {} {} was refused: {e}",
                        reference.kind, reference.name
                    ))
                });
            }
        }
    }
}

/// The server-side apply the host would send for a child it controls, as
/// a dry run: the object it would leave.
async fn dry_run(
    ctx: &Shared,
    kind: usize,
    namespace: Option<&str>,
    stamped: &Value,
    live: &DynamicObject,
) -> kube::Result<DynamicObject> {
    let mut body = stamped.clone();
    body["metadata"]["uid"] = serde_json::json!(live.uid());
    apply::api_for(&ctx.client, &ctx.kinds[kind].resource, namespace)
        .patch(
            &live.name_any(),
            &PatchParams::apply(&ctx.manager).force().dry_run(),
            &Patch::Apply(&body),
        )
        .await
}

/// The create the host would send for a new child, as a dry run.
async fn dry_create(
    ctx: &Shared,
    kind: usize,
    namespace: Option<&str>,
    stamped: &Value,
) -> kube::Result<DynamicObject> {
    let object: DynamicObject =
        serde_json::from_value(stamped.clone()).map_err(kube::Error::SerdeError)?;
    let params = kube::api::PostParams {
        dry_run: true,
        field_manager: Some(ctx.manager.clone()),
    };
    apply::api_for(&ctx.client, &ctx.kinds[kind].resource, namespace)
        .create(&params, &object)
        .await
}

/// An object without what every write changes (resourceVersion,
/// generation, managedFields) and without its status.
fn comparable(o: &DynamicObject) -> Value {
    let mut value = serde_json::to_value(o).expect("objects serialise");
    if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in ["resourceVersion", "generation", "managedFields"] {
            meta.remove(field);
        }
    }
    if let Some(map) = value.as_object_mut() {
        map.remove("status");
    }
    value
}
