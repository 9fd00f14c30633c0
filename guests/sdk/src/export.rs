//! The wasm export glue: the generated WIT bindings and the conversions
//! between them and the SDK's plain Rust types. Only compiled for wasm32;
//! guests reach it through [`export_operator!`](crate::export_operator).

use crate::{Description, Error, ErrorKind, EventType, Operator, Request, WireObserved};

/// The bindings `wit-bindgen` generates from `wit/` for the `operator-guest`
/// world. Not a stable API: use the SDK's types instead.
#[allow(missing_docs)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "operator-guest",
        pub_export_macro: true,
        export_macro_name: "export_guest",
        default_bindings_module: "::wasmop_guest::export::bindings",
    });
}

pub use bindings::exports::wasmop::operator::operator::Guest;
use bindings::wasmop::operator::types as wit;

/// Sends a panic's message to the host's log at error level, where the host
/// finds it to explain the trap that follows: a guest built for
/// `wasm32-unknown-unknown` has no stderr, and one built for `wasm32-wasip2`
/// reports the same way. Each call runs in a fresh instance, so every export
/// installs it.
fn report_panics() {
    std::panic::set_hook(Box::new(|info| crate::log::error(&info.to_string())));
}

/// `describe` for the operator `O`, in WIT types.
pub fn describe<O: Operator>() -> wit::Description {
    report_panics();
    let Description {
        primary,
        children,
        finalizer,
    } = O::describe();
    wit::Description {
        primary: kind_ref(primary),
        children: children
            .into_iter()
            .map(|child| wit::ChildKind {
                kind: kind_ref(child.kind),
                cluster_scoped: child.cluster_scoped,
            })
            .collect(),
        finalizer,
    }
}

/// `reconcile` for the operator `O`, in WIT types: wrap the request (nothing
/// is parsed before the guest asks), call the guest's logic, serialize its
/// answer.
pub fn reconcile<O: Operator>(
    request: wit::ReconcileRequest,
) -> Result<wit::ReconcileResponse, wit::ReconcileError> {
    report_panics();
    let now = crate::time::from_unix_seconds(request.now);
    let observed = request
        .observed
        .into_iter()
        .map(WireObserved::from)
        .collect();
    let request = Request::from_wire(request.parent, observed, request.deleting, now);
    let answer = O::reconcile(request).map(crate::Response::into_wire);
    match answer {
        Ok(wire) => Ok(wit::ReconcileResponse {
            children: wire.children,
            status: wire.status,
            requeue_after_seconds: wire.requeue_after_seconds,
            finalized: wire.finalized,
            events: wire
                .events
                .into_iter()
                .map(|event| wit::Event {
                    event_type: match event.event_type {
                        EventType::Normal => wit::EventType::Normal,
                        EventType::Warning => wit::EventType::Warning,
                    },
                    reason: event.reason,
                    message: event.message,
                })
                .collect(),
        }),
        Err(Error { kind, message }) => Err(wit::ReconcileError {
            kind: match kind {
                ErrorKind::Retryable => wit::ErrorKind::Retryable,
                ErrorKind::Permanent => wit::ErrorKind::Permanent,
            },
            message,
        }),
    }
}

impl From<wit::ObservedObject> for WireObserved {
    fn from(child: wit::ObservedObject) -> Self {
        Self {
            api_version: child.api_version,
            kind: child.kind,
            name: child.name,
            object: child.object,
        }
    }
}

fn kind_ref(kind: crate::KindRef) -> wit::KindRef {
    wit::KindRef {
        group: kind.group,
        version: kind.version,
        kind: kind.kind,
    }
}
