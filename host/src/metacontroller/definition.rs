//! A Metacontroller `CompositeController` (`metacontroller.k8s.io/v1alpha1`),
//! read as Metacontroller publishes it: the fields of its API reference, no
//! other. A field this host does not know, or cannot honour, is refused with
//! its path, so a definition never runs with part of it ignored.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::core::{Selector, SelectorExt};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::model::{ChildKind, Description, KindRef};

/// The API group and version of Metacontroller's definitions.
pub const API_VERSION: &str = "metacontroller.k8s.io/v1alpha1";

/// Why a definition cannot run.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {why}")]
pub struct Error {
    /// The field, as `spec.childResources[0].updateStrategy.method`.
    pub path: String,
    /// What is wrong with it.
    pub why: String,
}

impl Error {
    fn at(path: impl Into<String>, why: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            why: why.into(),
        }
    }
}

/// How a child resource's existing objects are brought to what the hook
/// wants (`childResources[].updateStrategy.method`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Method {
    /// Existing children are never updated (Metacontroller's default).
    #[default]
    OnDelete,
    /// A child that differs is deleted; the next sync creates it anew.
    Recreate,
    /// A child that differs is updated where it is.
    InPlace,
    /// As `Recreate`, one child at a time, each after the children already
    /// updated pass the status checks.
    RollingRecreate,
    /// As `InPlace`, one child at a time, as `RollingRecreate`.
    RollingInPlace,
}

impl Method {
    /// Whether children are updated one at a time.
    pub fn rolling(self) -> bool {
        matches!(self, Self::RollingRecreate | Self::RollingInPlace)
    }

    /// Whether a child that differs is deleted and created again.
    pub fn recreates(self) -> bool {
        matches!(self, Self::Recreate | Self::RollingRecreate)
    }
}

/// A condition a child must show before a rolling update moves on.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConditionCheck {
    /// The condition's `type`.
    #[serde(rename = "type")]
    pub type_: String,
    /// Its `status`, when the check names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Its `reason`, when the check names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A resource as the definition names it, with the kind it was resolved to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resolved {
    /// The API group, "" for the core group.
    pub group: String,
    /// The version.
    pub version: String,
    /// The kind.
    pub kind: String,
    /// Whether its objects live in a namespace.
    pub namespaced: bool,
}

impl Resolved {
    /// The kind as the contract names it.
    pub fn kind_ref(&self) -> KindRef {
        KindRef {
            group: self.group.clone(),
            version: self.version.clone(),
            kind: self.kind.clone(),
        }
    }

    /// `<Kind>.<apiVersion>`: how a sync request keys the children.
    pub fn children_key(&self) -> String {
        format!("{}.{}", self.kind, api_version(&self.group, &self.version))
    }
}

/// `apiVersion` of a group and version.
pub fn api_version(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    }
}

/// A resource the definition names: `apiVersion` and the plural `resource`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceName {
    /// Its path in the definition, for errors.
    pub path: String,
    /// `apiVersion`, e.g. "apps/v1".
    pub api_version: String,
    /// The plural, e.g. "statefulsets".
    pub resource: String,
}

impl ResourceName {
    /// Group and version of `api_version`.
    pub fn group_version(&self) -> (&str, &str) {
        match self.api_version.split_once('/') {
            Some((group, version)) => (group, version),
            None => ("", self.api_version.as_str()),
        }
    }
}

/// A child resource with its update strategy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildResource {
    /// How the definition names it.
    pub name: ResourceName,
    /// Its update strategy.
    pub method: Method,
    /// The conditions a rolling update waits for.
    pub checks: Vec<ConditionCheck>,
}

impl ChildResource {
    /// Whether `child` shows every condition the status checks ask for
    /// (`type`, and `status` and `reason` where given).
    pub fn passes(&self, child: &Value) -> bool {
        let conditions = child
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        self.checks.iter().all(|check| {
            conditions.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some(check.type_.as_str())
                    && check
                        .status
                        .as_deref()
                        .is_none_or(|s| c.get("status").and_then(Value::as_str) == Some(s))
                    && check
                        .reason
                        .as_deref()
                        .is_none_or(|r| c.get("reason").and_then(Value::as_str) == Some(r))
            })
        })
    }
}

/// The hooks a definition names, each as the file name the hook server
/// would serve it from (`sync` for `http://…/sync`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hooks {
    /// The sync hook's path, without its leading `/`.
    pub sync: String,
    /// The finalize hook's, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finalize: Option<String>,
    /// The customize hook's, if any: it names the related objects the
    /// sync and finalize hooks see.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub customize: Option<String>,
}

impl Hooks {
    /// Every hook's path, each once.
    pub fn routes(&self) -> Vec<String> {
        let mut routes = vec![self.sync.clone()];
        for route in self.finalize.iter().chain(&self.customize) {
            if !routes.contains(route) {
                routes.push(route.clone());
            }
        }
        routes
    }
}

/// Which of Metacontroller's controllers a definition is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavour {
    /// A `CompositeController`: it owns its parents' children.
    Composite,
    /// A `DecoratorController`: it adds labels, annotations and
    /// attachments to objects of an existing kind, its targets.
    Decorator,
}

/// Which parents (or targets) of the kind a controller takes: those whose
/// labels and annotations match its selectors (every one without).
#[derive(Clone, Debug, Default)]
pub struct Selection {
    /// `labelSelector`.
    pub labels: Option<Selector>,
    /// `annotationSelector` (`matchAnnotations`, `matchExpressions`).
    pub annotations: Option<Selector>,
}

impl Selection {
    /// Whether an object with `labels` and `annotations` is selected.
    pub fn selects(
        &self,
        labels: &BTreeMap<String, String>,
        annotations: &BTreeMap<String, String>,
    ) -> bool {
        self.labels.as_ref().is_none_or(|s| s.matches(labels))
            && self
                .annotations
                .as_ref()
                .is_none_or(|s| s.matches(annotations))
    }
}

/// A `CompositeController` or `DecoratorController` as read, before its
/// resources are resolved.
#[derive(Clone, Debug)]
pub struct Definition {
    /// Composite or decorator.
    pub flavour: Flavour,
    /// `metadata.name`.
    pub name: String,
    /// The definition as written, sent to every hook as `controller`.
    pub object: Value,
    /// `spec.parentResource`, or a decorator's one `spec.resources` entry.
    pub parent: ResourceName,
    /// The parents (targets) it takes.
    pub selection: Selection,
    /// `spec.childResources` (a decorator's `spec.attachments`), in order.
    pub children: Vec<ChildResource>,
    /// `spec.hooks`.
    pub hooks: Hooks,
    /// `spec.resyncPeriodSeconds`.
    pub resync_seconds: Option<u32>,
    /// `spec.generateSelector`: children are the parent's by ControllerRef
    /// alone; without it a parent's `spec.selector` also adopts orphans.
    pub generate_selector: bool,
}
/// The definitions in a file of YAML documents: each `CompositeController`
/// and `DecoratorController`, by name; other documents are left out.
pub fn definitions(yaml: &str) -> Result<Vec<(String, Value)>, Error> {
    let documents: Vec<Value> = serde_saphyr::from_multiple(yaml)
        .map_err(|e| Error::at("(file)", format!("not YAML: {e}")))?;
    let mut out = Vec::new();
    for document in documents {
        let kind = document.get("kind").and_then(Value::as_str).unwrap_or("");
        let api = document
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        if !matches!(kind, "CompositeController" | "DecoratorController") {
            continue;
        }
        if api != API_VERSION {
            return Err(Error::at(
                "apiVersion",
                format!("{kind} of {api:?}: only {API_VERSION} is known"),
            ));
        }
        let name = document
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .ok_or_else(|| Error::at("metadata.name", format!("the {kind} has no name")))?
            .to_owned();
        out.push((name, document));
    }
    Ok(out)
}

/// Picks the definition `name` (or the only one) of `yaml`.
pub fn pick(yaml: &str, name: Option<&str>) -> Result<Value, Error> {
    let mut all = definitions(yaml)?;
    let names = || {
        all_names(&all)
            .map(|n| format!("; it holds {n}"))
            .unwrap_or_default()
    };
    match name {
        Some(name) => match all.iter().position(|(n, _)| n == name) {
            Some(i) => Ok(all.swap_remove(i).1),
            None => Err(Error::at(
                "--name",
                format!(
                    "no CompositeController or DecoratorController named {name:?}{}",
                    names()
                ),
            )),
        },
        None if all.len() == 1 => Ok(all.pop().expect("one").1),
        None if all.is_empty() => Err(Error::at(
            "(file)",
            "no CompositeController or DecoratorController in the file",
        )),
        None => Err(Error::at(
            "--name",
            format!(
                "the file holds several definitions: pick one with --name{}",
                names()
            ),
        )),
    }
}

fn all_names(all: &[(String, Value)]) -> Option<String> {
    (!all.is_empty()).then(|| {
        all.iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    })
}

/// Refuses any key of `value` (an object at `path`) outside `known`.
fn known_keys(value: &Value, path: &str, known: &[&str]) -> Result<(), Error> {
    let Some(map) = value.as_object() else {
        return Err(Error::at(path, "must be an object"));
    };
    match map.keys().find(|k| !known.contains(&k.as_str())) {
        Some(unknown) => Err(Error::at(
            join(path, unknown),
            format!("unknown field (known here: {})", known.join(", ")),
        )),
        None => Ok(()),
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

fn string_at<'a>(value: &'a Value, path: &str, key: &str) -> Result<&'a str, Error> {
    value
        .get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| Error::at(join(path, key), "is required (a string)"))
}

fn resource_name(value: &Value, path: &str) -> Result<ResourceName, Error> {
    Ok(ResourceName {
        path: path.to_owned(),
        api_version: string_at(value, path, "apiVersion")?.to_owned(),
        resource: string_at(value, path, "resource")?.to_owned(),
    })
}

/// The hook's path: `webhook.url`'s path, or `webhook.path` (with a
/// `service`), without the leading `/`.
fn hook_path(hook: &Value, path: &str) -> Result<String, Error> {
    known_keys(hook, path, &["webhook", "version"])?;
    if let Some(version) = hook.get("version").and_then(Value::as_str)
        && version != "v1"
    {
        return Err(Error::at(
            join(path, "version"),
            format!("hook version {version:?}: only v1 is known"),
        ));
    }
    let webhook_path = join(path, "webhook");
    let webhook = hook
        .get("webhook")
        .ok_or_else(|| Error::at(&webhook_path, "is required"))?;
    known_keys(
        webhook,
        &webhook_path,
        &[
            "url",
            "path",
            "service",
            "timeout",
            "etag",
            "responseUIDCheck",
        ],
    )?;
    let route = match (
        webhook.get("url").and_then(Value::as_str),
        webhook.get("path").and_then(Value::as_str),
    ) {
        (Some(url), _) => {
            let after_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
            after_scheme
                .split_once('/')
                .map_or("", |(_, path)| path)
                .split(['?', '#'])
                .next()
                .unwrap_or("")
                .to_owned()
        }
        (None, Some(path)) => path.trim_start_matches('/').to_owned(),
        (None, None) => {
            return Err(Error::at(&webhook_path, "names neither a url nor a path"));
        }
    };
    Ok(route)
}

/// Reads a `CompositeController` or a `DecoratorController`. Any field
/// outside Metacontroller's API reference, and any it names that this host
/// cannot honour, is refused with the field's path.
pub fn read(object: &Value) -> Result<Definition, Error> {
    let flavour = match object.get("kind").and_then(Value::as_str).unwrap_or("") {
        "CompositeController" => Flavour::Composite,
        "DecoratorController" => Flavour::Decorator,
        other => {
            return Err(Error::at(
                "kind",
                format!("{other:?}: only CompositeController and DecoratorController are known"),
            ));
        }
    };
    known_keys(
        object,
        "",
        &["apiVersion", "kind", "metadata", "spec", "status"],
    )?;
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .ok_or_else(|| Error::at("metadata.name", "is required"))?
        .to_owned();
    let spec = object
        .get("spec")
        .ok_or_else(|| Error::at("spec", "is required"))?;
    let (parent, selection, children) = match flavour {
        Flavour::Composite => composite_resources(spec)?,
        Flavour::Decorator => decorator_resources(spec)?,
    };
    let hooks_value = spec
        .get("hooks")
        .ok_or_else(|| Error::at("spec.hooks", "is required"))?;
    known_keys(
        hooks_value,
        "spec.hooks",
        &["sync", "finalize", "customize"],
    )?;
    let sync = hooks_value
        .get("sync")
        .ok_or_else(|| Error::at("spec.hooks.sync", "is required"))?;
    let hook = |key: &str| {
        hooks_value
            .get(key)
            .map(|h| hook_path(h, &format!("spec.hooks.{key}")))
            .transpose()
    };
    let hooks = Hooks {
        sync: hook_path(sync, "spec.hooks.sync")?,
        finalize: hook("finalize")?,
        customize: hook("customize")?,
    };
    let resync_seconds = match spec.get("resyncPeriodSeconds") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_f64()
                .filter(|s| *s > 0.0 && *s <= f64::from(u32::MAX))
                .map(|s| s.ceil() as u32)
                .ok_or_else(|| {
                    Error::at(
                        "spec.resyncPeriodSeconds",
                        "must be a positive number of seconds",
                    )
                })?,
        ),
    };
    Ok(Definition {
        flavour,
        name,
        object: object.clone(),
        parent,
        selection,
        children,
        hooks,
        resync_seconds,
        generate_selector: spec.get("generateSelector") == Some(&Value::Bool(true)),
    })
}

type Resources = (ResourceName, Selection, Vec<ChildResource>);

/// A `CompositeController`'s parent and child resources.
fn composite_resources(spec: &Value) -> Result<Resources, Error> {
    known_keys(
        spec,
        "spec",
        &[
            "parentResource",
            "childResources",
            "hooks",
            "resyncPeriodSeconds",
            "generateSelector",
        ],
    )?;
    let parent_value = spec
        .get("parentResource")
        .ok_or_else(|| Error::at("spec.parentResource", "is required"))?;
    known_keys(
        parent_value,
        "spec.parentResource",
        &["apiVersion", "resource", "revisionHistory", "labelSelector"],
    )?;
    if let Some(history) = parent_value.get("revisionHistory") {
        known_keys(
            history,
            "spec.parentResource.revisionHistory",
            &["fieldPaths"],
        )?;
    }
    let selection = Selection {
        labels: selector(
            parent_value.get("labelSelector"),
            "spec.parentResource.labelSelector",
            "matchLabels",
        )?,
        annotations: None,
    };
    let parent = resource_name(parent_value, "spec.parentResource")?;
    let children = child_resources(spec.get("childResources"), "spec.childResources", true)?;
    if let Some(v) = spec.get("generateSelector")
        && !v.is_boolean()
    {
        return Err(Error::at("spec.generateSelector", "must be true or false"));
    }
    Ok((parent, selection, children))
}

/// A `DecoratorController`'s target resource and attachments. One target
/// resource: a guest reconciles one kind.
fn decorator_resources(spec: &Value) -> Result<Resources, Error> {
    known_keys(
        spec,
        "spec",
        &["resources", "attachments", "hooks", "resyncPeriodSeconds"],
    )?;
    let resources = match spec.get("resources") {
        Some(Value::Array(items)) if !items.is_empty() => items,
        _ => {
            return Err(Error::at(
                "spec.resources",
                "is required (a list of one resource)",
            ));
        }
    };
    if resources.len() > 1 {
        return Err(Error::at(
            "spec.resources[1]",
            "a DecoratorController of several target resources cannot be honoured: one wasmop guest reconciles one kind (split it into one definition per resource)",
        ));
    }
    let target = &resources[0];
    let path = "spec.resources[0]";
    known_keys(
        target,
        path,
        &[
            "apiVersion",
            "resource",
            "labelSelector",
            "annotationSelector",
            "ignoreStatusChanges",
        ],
    )?;
    if let Some(v) = target.get("ignoreStatusChanges")
        && !v.is_boolean()
    {
        return Err(Error::at(
            format!("{path}.ignoreStatusChanges"),
            "must be true or false",
        ));
    }
    let selection = Selection {
        labels: selector(
            target.get("labelSelector"),
            &format!("{path}.labelSelector"),
            "matchLabels",
        )?,
        annotations: selector(
            target.get("annotationSelector"),
            &format!("{path}.annotationSelector"),
            "matchAnnotations",
        )?,
    };
    let parent = resource_name(target, path)?;
    let children = child_resources(spec.get("attachments"), "spec.attachments", false)?;
    Ok((parent, selection, children))
}

/// A label (or annotation) selector at `path`: `matches` (`matchLabels` or
/// `matchAnnotations`) and `matchExpressions`, as Kubernetes' LabelSelector.
fn selector(value: Option<&Value>, path: &str, matches: &str) -> Result<Option<Selector>, Error> {
    let Some(value) = value.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    known_keys(value, path, &[matches, "matchExpressions"])?;
    let as_labels = serde_json::json!({
        "matchLabels": value.get(matches),
        "matchExpressions": value.get("matchExpressions"),
    });
    let parsed: LabelSelector =
        serde_json::from_value(as_labels).map_err(|e| Error::at(path, e.to_string()))?;
    Selector::try_from(parsed)
        .map(Some)
        .map_err(|e| Error::at(path, e.to_string()))
}

/// The child resources (a decorator's attachments) listed at `path`;
/// `rolling`: whether rolling update strategies may be named.
fn child_resources(
    listed: Option<&Value>,
    path: &str,
    rolling: bool,
) -> Result<Vec<ChildResource>, Error> {
    let listed = match listed {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(Error::at(path, "must be a list")),
    };
    let mut children = Vec::new();
    for (i, child) in listed.iter().enumerate() {
        let path = format!("{path}[{i}]");
        known_keys(child, &path, &["apiVersion", "resource", "updateStrategy"])?;
        let name = resource_name(child, &path)?;
        let strategy_path = format!("{path}.updateStrategy");
        let (method, checks) = match child.get("updateStrategy") {
            None | Some(Value::Null) => (Method::default(), Vec::new()),
            Some(strategy) => update_strategy(strategy, &strategy_path)?,
        };
        if method.rolling() && !rolling {
            return Err(Error::at(
                format!("{strategy_path}.method"),
                format!(
                    "{method:?} is not an update strategy of a DecoratorController's attachments (OnDelete, Recreate, InPlace)"
                ),
            ));
        }
        children.push(ChildResource {
            name,
            method,
            checks,
        });
    }
    Ok(children)
}

fn update_strategy(value: &Value, path: &str) -> Result<(Method, Vec<ConditionCheck>), Error> {
    known_keys(value, path, &["method", "statusChecks"])?;
    let method = match value.get("method") {
        None | Some(Value::Null) => Method::default(),
        Some(method) => serde_json::from_value(method.clone()).map_err(|_| {
            Error::at(
                format!("{path}.method"),
                format!(
                    "{method} is not an update strategy this wasmop can honour (OnDelete, Recreate, InPlace, RollingRecreate, RollingInPlace)"
                ),
            )
        })?,
    };
    let mut checks = Vec::new();
    if let Some(status_checks) = value.get("statusChecks") {
        let checks_path = format!("{path}.statusChecks");
        known_keys(status_checks, &checks_path, &["conditions"])?;
        for (i, condition) in status_checks
            .get("conditions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let path = format!("{checks_path}.conditions[{i}]");
            known_keys(condition, &path, &["type", "status", "reason"])?;
            checks.push(
                serde_json::from_value(condition.clone())
                    .map_err(|e| Error::at(&path, e.to_string()))?,
            );
        }
    }
    Ok((method, checks))
}

/// What a hook guest's `definition` export answers: the definition as
/// written and the kinds its resources resolve to.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Embedded {
    /// The definition as written.
    pub definition: Value,
    /// The parent's kind, then each child resource's, in order.
    pub kinds: Vec<Resolved>,
}

/// A definition read and resolved: what the host runs.
#[derive(Clone, Debug)]
pub struct Controller {
    /// The definition.
    pub definition: Definition,
    /// The parent's kind.
    pub parent: Resolved,
    /// Each child resource's kind, in the order of `definition.children`.
    pub children: Vec<Resolved>,
}

impl Definition {
    /// Where the definition lists its children: `spec.childResources`, a
    /// decorator's `spec.attachments`.
    pub fn children_path(&self) -> &'static str {
        match self.flavour {
            Flavour::Composite => "spec.childResources",
            Flavour::Decorator => "spec.attachments",
        }
    }
}

impl Controller {
    /// Whether it is a `DecoratorController`, whose parents are its
    /// targets: objects of another controller's kind.
    pub fn decorates(&self) -> bool {
        self.definition.flavour == Flavour::Decorator
    }

    /// Whether it takes the parent (target) with `labels` and
    /// `annotations`.
    pub fn selects(
        &self,
        labels: &BTreeMap<String, String>,
        annotations: &BTreeMap<String, String>,
    ) -> bool {
        self.definition.selection.selects(labels, annotations)
    }

    /// Reads what a hook guest's `definition` export answered.
    pub fn from_embedded(text: &str) -> Result<Self, Error> {
        let embedded: Embedded = serde_json::from_str(text)
            .map_err(|e| Error::at("(module)", format!("the embedded definition: {e}")))?;
        let definition = read(&embedded.definition)?;
        let mut kinds = embedded.kinds.into_iter();
        let parent = kinds
            .next()
            .ok_or_else(|| Error::at("(module)", "no kind for the parent resource"))?;
        let children: Vec<Resolved> = kinds.collect();
        if children.len() != definition.children.len() {
            return Err(Error::at(
                "(module)",
                format!(
                    "{} child kinds for {} child resources",
                    children.len(),
                    definition.children.len()
                ),
            ));
        }
        if parent.namespaced
            && let Some(i) = children.iter().position(|c| !c.namespaced)
        {
            return Err(Error::at(
                format!("{}[{i}]", definition.children_path()),
                format!(
                    "{} is cluster-scoped and the parent {} is namespaced: Kubernetes' garbage collector cannot follow an ownerReference from a cluster-scoped object to a namespaced one",
                    children[i].kind, parent.kind
                ),
            ));
        }
        Ok(Self {
            definition,
            parent,
            children,
        })
    }

    /// The finalizer this controller's parents carry while a finalize hook
    /// has work to do: Metacontroller's own name for it, so parents it
    /// finalized before move over as they are.
    pub fn finalizer(&self) -> Option<String> {
        let flavour = match self.definition.flavour {
            Flavour::Composite => "compositecontroller",
            Flavour::Decorator => "decoratorcontroller",
        };
        self.definition
            .hooks
            .finalize
            .as_ref()
            .map(|_| format!("metacontroller.io/{flavour}-{}", self.definition.name))
    }

    /// The guest's description: the parent kind, the child kinds, the
    /// finalizer when there is a finalize hook.
    pub fn description(&self) -> Description {
        Description {
            primary: self.parent.kind_ref(),
            children: self
                .children
                .iter()
                .map(|child| ChildKind {
                    kind: child.kind_ref(),
                    cluster_scoped: !child.namespaced,
                })
                .collect(),
            finalizer: self.finalizer(),
            related: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CATSET: &str = r#"
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: catset-controller
spec:
  parentResource:
    apiVersion: ctl.enisoc.com/v1
    resource: catsets
    revisionHistory:
      fieldPaths:
      - spec.template
  childResources:
  - apiVersion: v1
    resource: pods
    updateStrategy:
      method: RollingRecreate
      statusChecks:
        conditions:
        - type: Ready
          status: "True"
  - apiVersion: v1
    resource: persistentvolumeclaims
  hooks:
    sync:
      webhook:
        url: http://catset-controller.metacontroller/sync
    finalize:
      webhook:
        url: http://catset-controller.metacontroller/sync
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: catset-controller
"#;

    #[test]
    fn a_composite_controller_is_read_as_published() {
        let composite = read(&pick(CATSET, None).unwrap()).unwrap();
        assert_eq!(composite.name, "catset-controller");
        assert_eq!(composite.parent.resource, "catsets");
        assert_eq!(composite.children.len(), 2);
        assert_eq!(composite.children[0].method, Method::RollingRecreate);
        assert_eq!(composite.children[0].checks[0].type_, "Ready");
        assert_eq!(composite.children[1].method, Method::OnDelete);
        assert_eq!(composite.hooks.sync, "sync");
        assert_eq!(composite.hooks.finalize.as_deref(), Some("sync"));
    }

    #[test]
    fn a_field_it_does_not_know_or_cannot_honour_is_refused_by_its_path() {
        // (what the definition says, what it says instead, the path refused)
        let cases = [
            (
                "method: RollingRecreate",
                "method: Rolling",
                "spec.childResources[0].updateStrategy.method",
            ),
            (
                "resource: pods\n",
                "resource: pods\n    replicas: 2\n",
                "spec.childResources[0].replicas",
            ),
            (
                "  hooks:\n",
                "  hooks:\n    customize: {webhook: {url: http://x/c, retries: 3}}\n",
                "spec.hooks.customize.webhook.retries",
            ),
            (
                "    resource: catsets\n",
                "    resource: catsets\n    labelSelector: {matchLabel: {a: b}}\n",
                "spec.parentResource.labelSelector.matchLabel",
            ),
        ];
        for (from, to, path) in cases {
            let broken = pick(&CATSET.replacen(from, to, 1), None).unwrap();
            assert_eq!(read(&broken).unwrap_err().path, path, "{to}");
        }
    }

    const DECORATOR: &str = r#"
apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata:
  name: cluster-parent
spec:
  resources:
  - apiVersion: rbac.authorization.k8s.io/v1
    resource: clusterroles
    annotationSelector:
      matchExpressions:
      - {key: default-service-account-binding, operator: Exists}
  attachments:
  - apiVersion: rbac.authorization.k8s.io/v1
    resource: rolebindings
  hooks:
    sync:
      webhook:
        url: http://cluster-parent-controller.metacontroller/sync
"#;

    #[test]
    fn a_decorator_controller_is_read_with_its_selectors() {
        let decorator = read(&pick(DECORATOR, None).unwrap()).unwrap();
        assert_eq!(decorator.flavour, Flavour::Decorator);
        assert_eq!(decorator.parent.resource, "clusterroles");
        assert_eq!(decorator.children[0].name.resource, "rolebindings");
        let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        let annotated = map(&[("default-service-account-binding", "")]);
        assert!(decorator.selection.selects(&map(&[]), &annotated));
        assert!(!decorator.selection.selects(&annotated, &map(&[])));
        // (what the definition says, what it says instead, the path refused)
        let cases = [
            (
                "  - apiVersion: rbac.authorization.k8s.io/v1\n    resource: rolebindings\n",
                "  - apiVersion: rbac.authorization.k8s.io/v1\n    resource: rolebindings\n    updateStrategy: {method: RollingInPlace}\n",
                "spec.attachments[0].updateStrategy.method",
            ),
            (
                "  attachments:\n",
                "  - apiVersion: v1\n    resource: pods\n  attachments:\n",
                "spec.resources[1]",
            ),
            (
                "annotationSelector:",
                "annotationSelectors:",
                "spec.resources[0].annotationSelectors",
            ),
        ];
        for (from, to, path) in cases {
            let broken = pick(&DECORATOR.replacen(from, to, 1), None).unwrap();
            assert_eq!(read(&broken).unwrap_err().path, path, "{to}");
        }
    }

    #[test]
    fn several_definitions_need_a_name() {
        let two = format!(
            "{CATSET}\n---\n{}",
            CATSET.replace("catset-controller", "other")
        );
        assert_eq!(pick(&two, None).unwrap_err().path, "--name");
        assert_eq!(
            pick(&two, Some("other")).unwrap()["metadata"]["name"],
            "other"
        );
        assert!(
            pick(&two, Some("none"))
                .unwrap_err()
                .why
                .contains("catset-controller")
        );
    }
}
