//! A loaded guest: one compiled module version, ready to serve reconciles.
//!
//! Each [`Guest`] holds an `InstancePre` (linking done once) and the guest's
//! [`Description`]. Every call gets a fresh store and instance, so nothing a
//! guest does in one reconcile can leak into the next, and a trap only
//! poisons a store that is thrown away anyway.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use wasmtime::component::{Component, ComponentExportIndex};
use wasmtime::{Store, Trap};

use super::bindings::{OperatorGuest, OperatorGuestPre, guest_api, types};
use super::sandbox::GuestState;
use super::{EPOCH_TICK, Error, Limits, Result, Runtime};
use crate::model::{
    ChildKind, Description, ErrorKind, EventType, GuestError, GuestEvent, KindRef, ObservedText,
    RawResponse, Request,
};

/// The interface the guest exports, as named in its component.
const OPERATOR_INTERFACE: &str = "wasmop:operator/operator@0.1.0";

/// Parameters and results of the WIT `reconcile` function.
type ReconcileParams<'a> = (&'a guest_api::ReconcileRequest,);
type ReconcileResults = (Result<guest_api::ReconcileResponse, guest_api::ReconcileError>,);

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
    },
    /// The response is larger than the guest's limit.
    #[error("response too large: {size} bytes, limit {limit}")]
    ResponseTooLarge {
        /// The size returned.
        size: usize,
        /// The limit.
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
    /// A short CamelCase reason for Events and conditions.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Timeout(_) => "GuestTimeout",
            Self::MemoryLimit(_) => "GuestMemoryLimit",
            Self::Trap { .. } => "GuestTrap",
            Self::ResponseTooLarge { .. } => "GuestResponseTooLarge",
            Self::PoolExhausted(_) => "GuestPoolExhausted",
            Self::Guest(e) if e.kind == ErrorKind::Permanent => "ReconcileFailedPermanently",
            Self::Guest(_) => "ReconcileFailed",
        }
    }

    /// Whether retrying with backoff may help. Traps and limits are retried
    /// too (with backoff): a new module version may fix them.
    pub fn is_retryable(&self) -> bool {
        !matches!(self, Self::Guest(e) if e.kind == ErrorKind::Permanent)
    }
}

/// One loaded guest module version. Cheap to clone.
#[derive(Clone)]
pub struct Guest {
    inner: Arc<GuestInner>,
}

struct GuestInner {
    name: Arc<str>,
    runtime: Runtime,
    pre: OperatorGuestPre<GuestState>,
    /// The `reconcile` export, found once: a reconcile looks up and
    /// type-checks only the function it calls, not every export as the
    /// generated `OperatorGuestPre::instantiate` does.
    reconcile: ComponentExportIndex,
    description: Description,
    limits: Limits,
    digest: String,
}

impl Guest {
    pub(super) fn new(
        runtime: Runtime,
        name: &str,
        component: Component,
        limits: Limits,
        digest: String,
    ) -> Result<Self> {
        let instance_pre = runtime
            .linker()
            .instantiate_pre(&component)
            .map_err(Error::WrongWorld)?;
        let pre = OperatorGuestPre::new(instance_pre).map_err(Error::WrongWorld)?;
        // `OperatorGuestPre::new` has checked that both exports exist.
        let reconcile = component
            .get_export_index(None, OPERATOR_INTERFACE)
            .and_then(|interface| component.get_export_index(Some(&interface), "reconcile"))
            .ok_or_else(|| {
                Error::WrongWorld(wasmtime::format_err!(
                    "no export {OPERATOR_INTERFACE}#reconcile"
                ))
            })?;
        let name: Arc<str> = name.into();
        let description = Self::call_describe(&runtime, &pre, &name, &limits)?;
        Ok(Self {
            inner: Arc::new(GuestInner {
                name,
                runtime,
                pre,
                reconcile,
                description,
                limits,
                digest,
            }),
        })
    }

    fn call_describe(
        runtime: &Runtime,
        pre: &OperatorGuestPre<GuestState>,
        name: &Arc<str>,
        limits: &Limits,
    ) -> Result<Description> {
        let mut store = new_store(runtime, name, limits);
        let started = Instant::now();
        let result = pre
            .instantiate(&mut store)
            .and_then(|g: OperatorGuest| g.wasmop_operator_operator().call_describe(&mut store));
        store.data().flush_output();
        let d = result.map_err(|e| Error::Describe(classify(e, &store, limits, started)))?;
        Ok(Description {
            primary: kind_ref(d.primary),
            children: d
                .children
                .into_iter()
                .map(|c| ChildKind {
                    kind: kind_ref(c.kind),
                    cluster_scoped: c.cluster_scoped,
                })
                .collect(),
            finalizer: d.finalizer.filter(|f| !f.is_empty()),
        })
    }

    /// The guest's name (from the guest list or `--guest name=path`).
    pub fn name(&self) -> &str {
        &self.inner.name
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
        &self.inner.digest
    }

    /// Runs one reconcile in a fresh store. Blocking: call it from a thread
    /// that may block (`spawn_blocking`).
    pub fn reconcile(&self, request: &Request) -> Result<RawResponse, CallError> {
        let inner = &*self.inner;
        let (parent, observed) = request.to_texts();
        let wire = guest_api::ReconcileRequest {
            parent,
            observed: observed
                .into_iter()
                .map(types::ObservedObject::from)
                .collect(),
            deleting: request.deleting,
            now: unix_seconds(SystemTime::now()),
        };
        let mut store = new_store(&inner.runtime, &inner.name, &inner.limits);
        let started = Instant::now();
        let result = inner
            .pre
            .instance_pre()
            .instantiate(&mut store)
            .and_then(|instance| {
                let reconcile = instance.get_typed_func::<ReconcileParams<'_>, ReconcileResults>(
                    &mut store,
                    inner.reconcile,
                )?;
                let (result,) = reconcile.call(&mut store, (&wire,))?;
                Ok(result)
            });
        store.data().flush_output();
        let response = result
            .map_err(|e| classify(e, &store, &inner.limits, started))?
            .map_err(|e| GuestError {
                kind: match e.kind {
                    types::ErrorKind::Retryable => ErrorKind::Retryable,
                    types::ErrorKind::Permanent => ErrorKind::Permanent,
                },
                message: e.message,
            })?;
        let raw = RawResponse {
            children: response.children,
            status: response.status,
            requeue_after_seconds: response.requeue_after_seconds,
            finalized: response.finalized,
            events: response
                .events
                .into_iter()
                .map(|e| GuestEvent {
                    event_type: match e.event_type {
                        types::EventType::Normal => EventType::Normal,
                        types::EventType::Warning => EventType::Warning,
                    },
                    reason: e.reason,
                    message: e.message,
                })
                .collect(),
        };
        let size = raw.size();
        if size > inner.limits.max_response_bytes {
            return Err(CallError::ResponseTooLarge {
                size,
                limit: inner.limits.max_response_bytes,
            });
        }
        Ok(raw)
    }
}

impl std::fmt::Debug for Guest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guest")
            .field("name", &self.inner.name)
            .field("digest", &self.inner.digest)
            .field("description", &self.inner.description)
            .finish_non_exhaustive()
    }
}

fn new_store(runtime: &Runtime, name: &Arc<str>, limits: &Limits) -> Store<GuestState> {
    let mut store = Store::new(
        runtime.engine(),
        GuestState::new(name.clone(), limits.memory_bytes),
    );
    store.limiter(|s| &mut s.memory);
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
                detail: (!detail.is_empty()).then_some(detail),
            }
        }
    }
}

/// Whole seconds since the Unix epoch; a clock set before it reads as 0.
fn unix_seconds(at: SystemTime) -> u64 {
    at.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}

impl From<ObservedText> for types::ObservedObject {
    fn from(child: ObservedText) -> Self {
        Self {
            api_version: child.api_version,
            kind: child.kind,
            name: child.name,
            object: child.object,
        }
    }
}

fn kind_ref(k: types::KindRef) -> KindRef {
    KindRef {
        group: k.group,
        version: k.version,
        kind: k.kind,
    }
}
