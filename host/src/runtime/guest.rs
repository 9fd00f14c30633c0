//! A loaded guest: one compiled module version, ready to serve reconciles.
//!
//! Each [`Guest`] holds an `InstancePre` (linking done once) and the guest's
//! [`Description`]. Every call gets a fresh store and instance, so nothing a
//! guest does in one reconcile can leak into the next, and a trap only
//! poisons a store that is thrown away anyway.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;
use wasmtime::component::{
    Component, ComponentExportIndex, ComponentNamedList, InstancePre, Lift, Lower,
};
use wasmtime::{Store, Trap};

use super::abi::metacontroller::{CallParams, CallResults, DefinitionParams, DefinitionResults};
use super::abi::{
    self, AdmitParams, AdmitResults, ConvertParams, ConvertResults, DescribeParams,
    DescribeResults, ReconcileParams, ReconcileResults,
};
use super::capabilities::http::Outbound;
use super::sandbox::GuestState;
use super::{EPOCH_TICK, Error, Limits, Result, Runtime};
use crate::model::{
    Description, ErrorKind, GuestError, ReconcileError, ReconcileRequest, ReconcileResponse,
    Request, response_size,
};
use wasmop_contract::{AdmissionResponse, AdmissionReview, Reason};

/// What the host copies out of a guest per call beyond its response limit:
/// room for the strings' headers and the lists of a legitimate answer.
/// Wasmtime counts every byte and list element it copies out of a guest
/// against this "hostcall fuel" (128 MiB by default), so a guest cannot make
/// the host allocate far more than its response limit: two million empty
/// strings are tens of MiB on the host and no JSON at all.
const COPY_ALLOWANCE: usize = 1 << 20;

/// Why a guest call did not produce a response.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The call ran past its wall-clock deadline and was interrupted.
    #[error("deadline exceeded: the guest ran longer than {0:?} and was interrupted")]
    Timeout(Duration),
    /// The guest tried to grow its memory past the cap.
    #[error("memory limit exceeded: the guest tried to use more than {0} bytes")]
    MemoryLimit(usize),
    /// The guest trapped (panic, unreachable, stack overflow, ...).
    #[error("guest trapped: {reason}{}", detail.as_deref().map(|d| format!(" ({d})")).unwrap_or_default())]
    Trap {
        /// The trap as wasmtime reports it.
        reason: String,
        /// What the guest printed to stderr, usually its panic message.
        detail: Option<String>,
        /// The guest's own stack where it trapped, innermost first (see
        /// [`guest_stack`]); empty when the module keeps no names.
        frames: Vec<String>,
    },
    /// The response is larger than the guest's limit.
    #[error("response too large: {size} bytes, limit {limit}")]
    ResponseTooLarge {
        /// The size returned.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// The guest's answer had more data to copy out than the response limit
    /// allows (many small strings and list entries count too).
    #[error("response too large: copying the answer out of the guest passed {limit} bytes")]
    CopyLimit {
        /// Bytes the host was willing to copy.
        limit: usize,
    },
    /// Every slot of the instance pool is in use: more calls run at once
    /// than `--instance-pool` allows. Retried with backoff.
    #[error(
        "no free instance slot: {0}; raise --instance-pool above the sum of the guests' concurrency"
    )]
    PoolExhausted(String),
    /// The guest returned its own `reconcile-error`.
    #[error(transparent)]
    Guest(#[from] GuestError),
}

impl CallError {
    /// The reason for Events, conditions and metrics.
    pub fn reason(&self) -> Reason {
        match self {
            Self::Timeout(_) => Reason::GuestTimeout,
            Self::MemoryLimit(_) => Reason::GuestMemoryLimit,
            Self::Trap { .. } => Reason::GuestTrap,
            Self::ResponseTooLarge { .. } | Self::CopyLimit { .. } => Reason::GuestResponseTooLarge,
            Self::PoolExhausted(_) => Reason::GuestPoolExhausted,
            Self::Guest(e) if e.kind == ErrorKind::Permanent => Reason::ReconcileFailedPermanently,
            Self::Guest(_) => Reason::ReconcileFailed,
        }
    }

    /// The guest's stack of a trap, innermost first; empty otherwise.
    pub fn frames(&self) -> &[String] {
        match self {
            Self::Trap { frames, .. } => frames,
            _ => &[],
        }
    }

    /// Whether retrying with backoff may help. Traps and limits are retried
    /// too (with backoff): a new module version may fix them.
    pub fn is_retryable(&self) -> bool {
        !matches!(self, Self::Guest(e) if e.kind == ErrorKind::Permanent)
    }
}

/// Who a loaded version is: its guest name, module digest and settings.
#[derive(Clone, Debug)]
pub struct Identity {
    /// The guest's name (from the guest list or `--guest name=path`).
    pub name: Arc<str>,
    /// sha256 of the module bytes (hex).
    pub digest: String,
    /// The guest-list entry's settings as JSON text.
    pub settings: Option<String>,
}

/// One loaded guest module version. Cheap to clone.
#[derive(Clone)]
pub struct Guest {
    inner: Arc<GuestInner>,
}

struct GuestInner {
    identity: Identity,
    runtime: Runtime,
    pre: InstancePre<GuestState>,
    /// The `reconcile` export, found once: a reconcile looks up and
    /// type-checks only the function it calls, not every export as a
    /// generated `instantiate` does.
    reconcile: ComponentExportIndex,
    /// `admit`, when the module exports the admission interface.
    admit: Option<ComponentExportIndex>,
    /// `convert`, when the module exports the conversion interface.
    convert: Option<ComponentExportIndex>,
    description: Description,
    limits: Limits,
    imports: Imports,
    /// The contract version the module was built against.
    contract: abi::Contract,
    /// The controller of a Metacontroller hook guest, whose `reconcile`
    /// export index is the hooks' `call`.
    hooks: Option<crate::metacontroller::Controller>,
}

/// What a component imports beyond the WIT's `log`, which decides how it is
/// called.
#[derive(Clone, Copy, Debug, Default)]
struct Imports {
    /// Any WASI interface: the call may wait in the host, so it runs
    /// asynchronously under a timeout.
    wasi: bool,
    /// `wasi:http`: the call gets its outbound grant.
    http: bool,
}

impl Imports {
    fn of(component: &Component, engine: &wasmtime::Engine) -> Self {
        let mut imports = Self::default();
        for (name, _) in component.component_type().imports(engine) {
            imports.wasi |= name.starts_with("wasi:");
            imports.http |= name.starts_with("wasi:http/");
        }
        imports
    }
}

/// One call's result, with the outbound requests the host refused during
/// it (each `METHOD url: why`).
#[derive(Debug)]
pub struct Reply<T> {
    /// What the call returned.
    pub result: Result<T, CallError>,
    /// Requests refused by the guest's `allowedOutboundHosts` or address
    /// rules.
    pub refused: Vec<String>,
    /// What a Metacontroller decorator's hook set on its target besides
    /// the attachments.
    pub decoration: Option<crate::metacontroller::sync::Decoration>,
}

impl Guest {
    pub(super) fn new(
        runtime: Runtime,
        identity: Identity,
        component: Component,
        limits: Limits,
    ) -> Result<Self> {
        let pre = runtime
            .linker()
            .instantiate_pre(&component)
            .map_err(Error::WrongWorld)?;
        if component
            .get_export_index(None, abi::metacontroller::HOOKS_INTERFACE)
            .is_some()
        {
            return Self::hooks(runtime, identity, component, pre, limits);
        }
        // Checks that the component implements the world: both exports, of
        // the right types.
        abi::v0_1::OperatorGuestPre::new(pre.clone()).map_err(Error::WrongWorld)?;
        let reconcile = required_export(&component, abi::OPERATOR_INTERFACE, "reconcile")?;
        let describe = required_export(&component, abi::OPERATOR_INTERFACE, "describe")?;
        let admit = export(&component, abi::ADMISSION_INTERFACE, "admit");
        let convert = export(&component, abi::CONVERSION_INTERFACE, "convert");
        // An optional export is type-checked against the world that has it.
        match (admit.is_some(), convert.is_some()) {
            (false, false) => {}
            (true, false) => {
                abi::v0_1::admission::AdmissionGuestPre::new(pre.clone())
                    .map_err(Error::WrongWorld)?;
            }
            (false, true) => {
                abi::v0_1::conversion::ConversionGuestPre::new(pre.clone())
                    .map_err(Error::WrongWorld)?;
            }
            (true, true) => {
                abi::v0_1::webhook::WebhookGuestPre::new(pre.clone()).map_err(Error::WrongWorld)?;
            }
        }
        let imports = Imports::of(&component, runtime.engine());
        let description =
            Self::call_describe(&runtime, &pre, describe, &identity, &limits, imports)?;
        crate::validate::description::check(&description, &limits.privileged)?;
        Ok(Self {
            inner: Arc::new(GuestInner {
                identity,
                runtime,
                pre,
                reconcile,
                admit,
                convert,
                description,
                limits,
                imports,
                contract: abi::Contract::V0_1,
                hooks: None,
            }),
        })
    }

    /// A guest made from a Metacontroller controller: its description is
    /// the definition the module carries; its `reconcile` is the hooks'
    /// `call`, through [`crate::metacontroller::sync`].
    fn hooks(
        runtime: Runtime,
        identity: Identity,
        component: Component,
        pre: InstancePre<GuestState>,
        limits: Limits,
    ) -> Result<Self> {
        abi::metacontroller::HookGuestPre::new(pre.clone()).map_err(Error::WrongWorld)?;
        let call = required_export(&component, abi::metacontroller::HOOKS_INTERFACE, "call")?;
        let definition = required_export(
            &component,
            abi::metacontroller::HOOKS_INTERFACE,
            "definition",
        )?;
        if identity.settings.is_some() {
            return Err(Error::InvalidSettings(
                "a Metacontroller controller takes no settings: its definition is in the module"
                    .to_owned(),
            ));
        }
        let imports = Imports::of(&component, runtime.engine());
        let (text,) = call_once::<DefinitionParams, DefinitionResults>(
            &runtime,
            &pre,
            &identity.name,
            &limits,
            imports,
            &Arc::default(),
            definition,
            "describe",
            (),
        )
        .map_err(Error::Describe)?;
        let controller = crate::metacontroller::Controller::from_embedded(&text)
            .map_err(|e| Error::Definition(e.to_string()))?;
        let description = controller.description();
        if controller.decorates() {
            crate::validate::description::check_decorator(&description, &limits.privileged)?;
        } else {
            crate::validate::description::check(&description, &limits.privileged)?;
        }
        Ok(Self {
            inner: Arc::new(GuestInner {
                identity,
                runtime,
                pre,
                reconcile: call,
                admit: None,
                convert: None,
                description,
                limits,
                imports,
                contract: abi::Contract::Metacontroller,
                hooks: Some(controller),
            }),
        })
    }

    /// The contract version the module was built against.
    pub fn contract(&self) -> abi::Contract {
        self.inner.contract
    }

    fn call_describe(
        runtime: &Runtime,
        pre: &InstancePre<GuestState>,
        describe: ComponentExportIndex,
        identity: &Identity,
        limits: &Limits,
        imports: Imports,
    ) -> Result<Description> {
        // `describe` runs at every load: it may not call out.
        let result = call_once::<DescribeParams<'_>, DescribeResults>(
            runtime,
            pre,
            &identity.name,
            limits,
            imports,
            &Arc::default(),
            describe,
            "describe",
            (identity.settings.as_deref(),),
        )
        .map(|(result,)| result);
        let mut description = result.map_err(Error::Describe)?.map_err(|mut why| {
            bound(&mut why);
            Error::InvalidSettings(why)
        })?;
        if description.finalizer.as_deref() == Some("") {
            description.finalizer = None;
        }
        Ok(description)
    }

    /// The guest's name (from the guest list or `--guest name=path`).
    pub fn name(&self) -> &str {
        &self.inner.identity.name
    }

    /// What the guest manages.
    pub fn description(&self) -> &Description {
        &self.inner.description
    }

    /// The limits this version runs under.
    pub fn limits(&self) -> &Limits {
        &self.inner.limits
    }

    /// The sha256 digest of the module bytes (hex).
    pub fn digest(&self) -> &str {
        &self.inner.identity.digest
    }

    /// The settings this version was described with, as JSON text.
    pub fn settings(&self) -> Option<&str> {
        self.inner.identity.settings.as_deref()
    }

    /// Whether the module imports `wasi:http` (and so runs with its
    /// `allowedOutboundHosts`).
    pub fn imports_http(&self) -> bool {
        self.inner.imports.http
    }

    /// Whether the guest is a Metacontroller controller (`wasmop
    /// metacontroller build`), whose parents' CRDs were written for
    /// Metacontroller.
    pub fn follows_metacontroller(&self) -> bool {
        self.inner.hooks.is_some()
    }

    /// The Metacontroller controller a hook guest runs (`None` for any
    /// other guest).
    pub fn metacontroller(&self) -> Option<&crate::metacontroller::Controller> {
        self.inner.hooks.as_ref()
    }

    /// Whether the guest is a Metacontroller `DecoratorController`, whose
    /// parents are its targets: another controller's objects.
    pub fn decorates(&self) -> bool {
        self.inner.hooks.as_ref().is_some_and(|c| c.decorates())
    }

    /// Whether the guest takes `parent`: every parent, but those a
    /// Metacontroller controller's label or annotation selector leaves out.
    pub fn selects(&self, parent: &kube::api::DynamicObject) -> bool {
        use kube::ResourceExt as _;
        self.inner
            .hooks
            .as_ref()
            .is_none_or(|c| c.selects(parent.labels(), parent.annotations()))
    }

    /// Each child kind's update strategy, for a guest made from a
    /// Metacontroller controller (`None` for any other guest).
    pub fn update_strategies(&self) -> Option<&[crate::metacontroller::definition::ChildResource]> {
        self.inner
            .hooks
            .as_ref()
            .map(|controller| controller.definition.children.as_slice())
    }

    /// Whether the module exports `admit`.
    pub fn admits(&self) -> bool {
        self.inner.admit.is_some()
    }

    /// Whether the module exports `convert`.
    pub fn converts(&self) -> bool {
        self.inner.convert.is_some()
    }

    /// Calls `admit` in a fresh store, with the guest's deadline and memory
    /// cap and no outbound HTTP. `None` when the module has no `admit`.
    /// Blocking, as [`Self::reconcile`].
    pub fn admit(&self, review: &AdmissionReview) -> Option<Result<AdmissionResponse, CallError>> {
        let export = self.inner.admit?;
        Some(
            self.offline::<AdmitParams<'_>, AdmitResults>(export, "admit", (review,))
                .map(|(response,)| response),
        )
    }

    /// Calls `convert` in a fresh store, as [`Self::admit`]: the converted
    /// objects, or the guest's error message.
    pub fn convert(
        &self,
        objects: &[String],
        desired_api_version: &str,
    ) -> Option<Result<Result<Vec<String>, String>, CallError>> {
        let export = self.inner.convert?;
        Some(
            self.offline::<ConvertParams<'_>, ConvertResults>(
                export,
                "convert",
                (objects, desired_api_version),
            )
            .map(|(result,)| result),
        )
    }

    /// [`call_once`] of this version's `export`, with no outbound HTTP.
    fn offline<P, R>(
        &self,
        export: ComponentExportIndex,
        name: &'static str,
        params: P,
    ) -> Result<R, CallError>
    where
        P: ComponentNamedList + Lower + Send + Sync,
        R: ComponentNamedList + Lift + Send + Sync + 'static,
    {
        let inner = &*self.inner;
        call_once(
            &inner.runtime,
            &inner.pre,
            &inner.identity.name,
            &inner.limits,
            inner.imports,
            &Arc::default(),
            export,
            name,
            params,
        )
    }

    /// Runs one reconcile in a fresh store. Blocking: call it from a thread
    /// that may block (`spawn_blocking`).
    pub fn reconcile(&self, request: &Request) -> Result<ReconcileResponse, CallError> {
        self.call_reconcile(request).result
    }

    /// [`Self::reconcile`], with the outbound requests refused during it.
    pub fn call_reconcile(&self, request: &Request) -> Reply<ReconcileResponse> {
        self.call_reconcile_at(request, now())
    }

    /// [`Self::call_reconcile`] with the time the request carries (two
    /// versions answering one request see the same `now`).
    pub fn call_reconcile_at(&self, request: &Request, now: u64) -> Reply<ReconcileResponse> {
        self.reconcile_call(request, now, &self.inner.limits.outbound)
    }

    /// [`Self::call_reconcile_at`] with every outbound request refused: a
    /// call whose answer is only looked at (a shadow candidate, a plan)
    /// reaches nothing outside.
    pub fn call_reconcile_offline(&self, request: &Request, now: u64) -> Reply<ReconcileResponse> {
        self.reconcile_call(request, now, &Arc::default())
    }

    /// Calls `reconcile` with a request already in its wire form (the
    /// same one another version was given), outbound requests allowed as
    /// the entry says. A Metacontroller hook guest's hook is shown the
    /// `related` objects
    /// its customize hook selected (as
    /// [`crate::metacontroller::sync::related_map`] makes them; `null`:
    /// none); any other guest ignores them.
    pub fn call_reconcile_wire(
        &self,
        wire: &ReconcileRequest,
        related: &Value,
    ) -> Reply<ReconcileResponse> {
        self.wire_call(wire, &self.inner.limits.outbound, related)
    }

    /// [`Self::call_reconcile_wire`] with every outbound request refused (a
    /// shadow candidate's call).
    pub fn call_reconcile_wire_offline(
        &self,
        wire: &ReconcileRequest,
        related: &Value,
    ) -> Reply<ReconcileResponse> {
        self.wire_call(wire, &Arc::default(), related)
    }

    /// Calls a Metacontroller hook guest's customize hook for `parent`:
    /// the rules of the related objects its sync hook is to see (none
    /// without a customize hook, or for any other guest).
    pub fn call_customize(
        &self,
        parent: &Value,
    ) -> Result<Vec<crate::metacontroller::sync::RelatedRule>, CallError> {
        use crate::metacontroller::sync;
        let inner = &*self.inner;
        let Some(call) = inner
            .hooks
            .as_ref()
            .and_then(|c| sync::customize(c, parent))
        else {
            return Ok(Vec::new());
        };
        let result = call_once::<CallParams<'_>, CallResults>(
            &inner.runtime,
            &inner.pre,
            &inner.identity.name,
            &inner.limits,
            inner.imports,
            &inner.limits.outbound,
            inner.reconcile,
            "customize",
            (&call.route, &call.body),
        )?;
        let hook_failed = |mut message: String| {
            bound(&mut message);
            CallError::Guest(GuestError::from(ReconcileError {
                kind: ErrorKind::Retryable,
                message,
            }))
        };
        match result {
            (Err(message),) => Err(hook_failed(format!("the customize hook failed: {message}"))),
            (Ok(text),) => sync::related_rules(parent, &text).map_err(hook_failed),
        }
    }

    fn reconcile_call(
        &self,
        request: &Request,
        now: u64,
        outbound: &Arc<super::capabilities::http::OutboundHosts>,
    ) -> Reply<ReconcileResponse> {
        self.wire_call(
            &request.to_wire(now, self.settings()),
            outbound,
            &Value::Null,
        )
    }

    /// One reconcile; `related`: a hook guest's related objects (`null`:
    /// none).
    fn wire_call(
        &self,
        wire: &ReconcileRequest,
        outbound: &Arc<super::capabilities::http::OutboundHosts>,
        related: &Value,
    ) -> Reply<ReconcileResponse> {
        let inner = &*self.inner;
        let mut store = new_store(
            &inner.runtime,
            &inner.identity.name,
            &inner.limits,
            inner.imports,
            outbound,
        );
        let started = Instant::now();
        let mut decoration = None;
        let result = match &inner.hooks {
            None => invoke::<ReconcileParams<'_>, ReconcileResults>(
                &inner.pre,
                &mut store,
                inner.reconcile,
                (wire,),
                inner.imports,
                &inner.limits,
            )
            .map(|(result,)| result),
            Some(controller) => {
                call_hook(controller, wire, related, inner, &mut store).map(|answer| {
                    answer.map(|answer| {
                        decoration = answer.decoration;
                        answer.response
                    })
                })
            }
        };
        store.data().flush_output();
        observe_call(&inner.runtime, &inner.identity.name, "reconcile", started);
        let refused = store
            .data()
            .outbound
            .as_ref()
            .map(Outbound::refused)
            .unwrap_or_default();
        let result = result
            .map_err(|e| classify(e, &store, &inner.limits, started))
            .and_then(|r| {
                r.map_err(|e| {
                    let mut error = GuestError::from(e);
                    bound(&mut error.message);
                    CallError::Guest(error)
                })
            })
            .and_then(|response| {
                let size = response_size(&response);
                if size > inner.limits.max_response_bytes {
                    return Err(CallError::ResponseTooLarge {
                        size,
                        limit: inner.limits.max_response_bytes,
                    });
                }
                Ok(response)
            });
        Reply {
            result,
            refused,
            decoration,
        }
    }
}

/// The function `name` of the exported `interface`, if the component has it.
fn export(component: &Component, interface: &str, name: &str) -> Option<ComponentExportIndex> {
    component
        .get_export_index(None, interface)
        .and_then(|i| component.get_export_index(Some(&i), name))
}

/// [`export`], which the component's world must have.
fn required_export(
    component: &Component,
    interface: &str,
    name: &str,
) -> Result<ComponentExportIndex> {
    export(component, interface, name)
        .ok_or_else(|| Error::WrongWorld(wasmtime::format_err!("no export {interface}#{name}")))
}

/// One reconcile of a Metacontroller hook guest: the hook's request built
/// from `wire`, the hook called through the `call` export, its answer
/// turned into the reconcile's. A hook that fails, or answers what cannot be
/// written, fails the reconcile with its own words, retried with backoff as
/// Metacontroller retries a failed hook.
fn call_hook(
    controller: &crate::metacontroller::Controller,
    wire: &ReconcileRequest,
    related: &Value,
    inner: &GuestInner,
    store: &mut Store<GuestState>,
) -> wasmtime::Result<Result<crate::metacontroller::sync::Answer, ReconcileError>> {
    use crate::metacontroller::sync;
    let failed = |message: String| ReconcileError {
        kind: ErrorKind::Retryable,
        message,
    };
    let empty = Value::Object(serde_json::Map::new());
    let related = if related.is_null() { &empty } else { related };
    let call = match sync::request(controller, wire, related) {
        Ok(call) => call,
        Err(message) => return Ok(Err(failed(message))),
    };
    let (answer,) = invoke::<CallParams<'_>, CallResults>(
        &inner.pre,
        store,
        inner.reconcile,
        (&call.route, &call.body),
        inner.imports,
        &inner.limits,
    )?;
    Ok(match answer {
        Err(message) => Err(failed(format!("the {} hook failed: {message}", call.hook))),
        Ok(text) => sync::response(controller, wire, call.hook, &text).map_err(failed),
    })
}

/// The time a request carries: seconds since the Unix epoch.
pub fn now() -> u64 {
    unix_seconds(SystemTime::now())
}

/// One call of `export` (named `name` in the metrics) in a fresh store
/// under `limits`, outbound HTTP as `outbound` grants it (none for
/// `describe`, `admit` and `convert`, which may not call out). The response
/// is bounded by the copy limit.
#[allow(clippy::too_many_arguments)]
fn call_once<P, R>(
    runtime: &Runtime,
    pre: &InstancePre<GuestState>,
    guest: &Arc<str>,
    limits: &Limits,
    imports: Imports,
    outbound: &Arc<super::capabilities::http::OutboundHosts>,
    export: ComponentExportIndex,
    name: &'static str,
    params: P,
) -> Result<R, CallError>
where
    P: ComponentNamedList + Lower + Send + Sync,
    R: ComponentNamedList + Lift + Send + Sync + 'static,
{
    let mut store = new_store(runtime, guest, limits, imports, outbound);
    let started = Instant::now();
    let result = invoke::<P, R>(pre, &mut store, export, params, imports, limits);
    store.data().flush_output();
    observe_call(runtime, guest, name, started);
    result.map_err(|e| classify(e, &store, limits, started))
}

/// Instantiates the guest in `store` and calls `export` once: directly for
/// a guest that imports no WASI, else asynchronously under a timeout at the
/// call's deadline (see the module docs of [`super`]).
fn invoke<P, R>(
    pre: &InstancePre<GuestState>,
    store: &mut Store<GuestState>,
    export: ComponentExportIndex,
    params: P,
    imports: Imports,
    limits: &Limits,
) -> wasmtime::Result<R>
where
    P: ComponentNamedList + Lower + Send + Sync,
    R: ComponentNamedList + Lift + Send + Sync + 'static,
{
    if !imports.wasi {
        let instance = pre.instantiate(&mut *store)?;
        let func = instance.get_typed_func::<P, R>(&mut *store, export)?;
        return func.call(&mut *store, params);
    }
    let run = async {
        let instance = pre.instantiate_async(&mut *store).await?;
        let func = instance.get_typed_func::<P, R>(&mut *store, export)?;
        func.call_async(&mut *store, params).await
    };
    // The epoch deadline traps a guest that computes; this one stops a guest
    // that waits, a tick later.
    let wait = limits.timeout + EPOCH_TICK;
    wasmtime_wasi::runtime::in_tokio(async {
        tokio::time::timeout(wait, run)
            .await
            .unwrap_or_else(|_| Err(wasmtime::Error::new(Trap::Interrupt)))
    })
}

impl std::fmt::Debug for Guest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guest")
            .field("name", &self.inner.identity.name)
            .field("digest", &self.inner.identity.digest)
            .field("description", &self.inner.description)
            .finish_non_exhaustive()
    }
}

/// Records how long a call to `export` of guest `name` took.
fn observe_call(runtime: &Runtime, name: &str, export: &'static str, started: Instant) {
    runtime
        .metrics()
        .guest_call
        .get_or_create(&crate::telemetry::metrics::ExportLabels {
            guest: name.to_owned(),
            export,
        })
        .observe(started.elapsed().as_secs_f64());
}

/// The most the host copies out of a guest in one call under `limits`.
fn copy_limit(limits: &Limits) -> usize {
    limits.max_response_bytes.saturating_add(COPY_ALLOWANCE)
}

fn new_store(
    runtime: &Runtime,
    name: &Arc<str>,
    limits: &Limits,
    imports: Imports,
    outbound: &Arc<super::capabilities::http::OutboundHosts>,
) -> Store<GuestState> {
    let outbound = imports.http.then(|| {
        Outbound::new(
            outbound.clone(),
            name.clone(),
            Instant::now() + limits.timeout,
            runtime.metrics().clone(),
        )
    });
    let mut store = Store::new(
        runtime.engine(),
        GuestState::new(name.clone(), limits.memory_bytes, outbound),
    );
    store.limiter(|s| &mut s.memory);
    store.set_hostcall_fuel(copy_limit(limits));
    let ticks = limits
        .timeout
        .as_nanos()
        .div_ceil(EPOCH_TICK.as_nanos())
        .max(1)
        + 1;
    store.set_epoch_deadline(u64::try_from(ticks).unwrap_or(u64::MAX));
    store.epoch_deadline_trap();
    store
}

fn classify(
    error: wasmtime::Error,
    store: &Store<GuestState>,
    limits: &Limits,
    started: Instant,
) -> CallError {
    if store.data().memory.exceeded {
        return CallError::MemoryLimit(limits.memory_bytes);
    }
    if let Some(full) = error.downcast_ref::<wasmtime::PoolConcurrencyLimitError>() {
        return CallError::PoolExhausted(full.to_string());
    }
    // Wasmtime's copy-limit error has no public type; its message is stable.
    if format!("{error:#}").contains("too much data is being copied") {
        return CallError::CopyLimit {
            limit: copy_limit(limits),
        };
    }
    match error.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => CallError::Timeout(limits.timeout),
        trap => {
            let stderr = store.data().failure_text();
            let reason = match trap {
                Some(Trap::StackOverflow) => "stack overflow".to_string(),
                Some(Trap::UnreachableCodeReached) if stderr.contains("panicked") => {
                    "panic".to_string()
                }
                Some(t) => t.to_string(),
                None => format!("{error:#}"),
            };
            tracing::debug!(elapsed = ?started.elapsed(), "guest call failed: {error:?}");
            // One line per failure in logs and events: the panic message
            // without Rust's backtrace hint.
            let detail = stderr
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with("note: run with `RUST_BACKTRACE"))
                .collect::<Vec<_>>()
                .join(" | ");
            CallError::Trap {
                reason,
                detail: (!detail.is_empty()).then(|| {
                    let mut detail = detail;
                    bound(&mut detail);
                    detail
                }),
                frames: error
                    .downcast_ref::<wasmtime::WasmBacktrace>()
                    .map(guest_stack)
                    .unwrap_or_default(),
            }
        }
    }
}

/// The stack of a module built without names.
pub const STRIPPED: &str =
    "(no function names: the module was built stripped; a debug build shows its stack)";

/// How many of a trap's frames are kept.
pub const MAX_FRAMES: usize = 8;

/// Name prefixes of the frames a panic passes through on its way to the
/// trap (Rust's standard library and its panic runtime), which say nothing
/// about where the guest failed.
const PANIC_MACHINERY: &[&str] = &[
    "std::",
    "core::",
    "alloc::",
    "<std::",
    "<core::",
    "<alloc::",
    "__rust",
    "rust_panic",
    "rust_begin_unwind",
    "__rdl_",
    "abort",
];

/// The guest's own frames of `backtrace`, innermost first, at most
/// [`MAX_FRAMES`]: each function's name from the module's name section
/// (Rust names demangled, else DWARF's), with `file:line` where the module keeps DWARF
/// line tables (a debug build), without the panic machinery's frames.
/// A frame without a name is `wasm function <index>`; a module without
/// any names (a stripped build) gives the one line [`STRIPPED`].
pub fn guest_stack(backtrace: &wasmtime::WasmBacktrace) -> Vec<String> {
    let named = |frame: &wasmtime::FrameInfo| {
        frame.func_name().is_some() || frame.symbols().iter().any(|s| s.name().is_some())
    };
    if !backtrace.frames().is_empty() && !backtrace.frames().iter().any(named) {
        return vec![STRIPPED.to_owned()];
    }
    backtrace
        .frames()
        .iter()
        .filter_map(|frame| {
            // The name section's name is the whole path; DWARF's is the
            // function's own name only.
            let dwarf = frame.symbols().iter().find_map(|s| s.name());
            let name = match frame.func_name().or(dwarf) {
                Some(name) => format!("{:#}", rustc_demangle::demangle(name)),
                None => format!("wasm function {}", frame.func_index()),
            };
            if PANIC_MACHINERY.iter().any(|p| name.starts_with(p)) {
                return None;
            }
            let place = frame
                .symbols()
                .iter()
                .find_map(|s| Some((s.file()?, s.line()?)));
            Some(frame_text(&match place {
                Some((file, line)) => format!("{name} at {file}:{line}"),
                None => name,
            }))
        })
        .take(MAX_FRAMES)
        .collect()
}

/// The most of one frame's text that is kept.
const MAX_FRAME_TEXT: usize = 300;

/// A frame as the module names it, made safe for one log line: the names
/// and paths are the guest's own, so control characters become `?` and
/// the text is cut at [`MAX_FRAME_TEXT`] bytes.
fn frame_text(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if out.len() + c.len_utf8() > MAX_FRAME_TEXT {
            out.push('…');
            break;
        }
        out.push(if c.is_control() { '?' } else { c });
    }
    out
}

/// Whole seconds since the Unix epoch; a clock set before it reads as 0.
fn unix_seconds(at: SystemTime) -> u64 {
    at.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}

/// Cuts text a guest chose (its error message, what it printed before a
/// trap) to the largest sink it may reach, a condition's message: a
/// failure is held (health, rollout records, logs) and quoted at that size
/// at most, whatever the guest sent; each sink cuts it further to its own.
fn bound(text: &mut String) {
    if let std::borrow::Cow::Owned(cut) =
        crate::sink::cut(text, crate::sink::CONDITION_MESSAGE_BYTES)
    {
        *text = cut;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_a_guest_names_cannot_break_a_log_line_or_flood_it() {
        assert_eq!(
            frame_text("evil\nINFO forged line\u{1b}[31m"),
            "evil?INFO forged line?[31m"
        );
        let long = frame_text(&"x".repeat(10_000));
        assert!(long.len() <= MAX_FRAME_TEXT + '…'.len_utf8() && long.ends_with('…'));
        assert_eq!(frame_text("reconcile at lib.rs:9"), "reconcile at lib.rs:9");
    }
}
