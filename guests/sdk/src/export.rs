//! The wasm export glue: the generated WIT bindings and the conversions
//! between them and the contract's plain Rust types, the one place where
//! the two meet (a new WIT field fails to compile here until it is
//! carried). Only compiled for wasm32; guests reach it through
//! [`export_operator!`](crate::export_operator).

#[cfg(feature = "admission")]
use crate::Admission;
#[cfg(feature = "conversion")]
use crate::Conversion;
#[cfg(feature = "admission")]
use crate::admission::{AdmissionResponse, Operation};
use crate::{
    ChildKind, Description, Error, ErrorKind, Event, EventType, KindRef, ObjectRef, ObservedObject,
    Operator, ReconcileRequest, ReconcileResponse, RelatedBy, RelatedKind, Request, Settings,
};

/// The bindings `wit-bindgen` generates from `wit/` for the world the SDK's
/// features select: `operator-guest`, or with `admission` and `conversion`
/// the world that also exports those. Not a stable API: use the SDK's types
/// instead.
#[allow(missing_docs)]
pub mod bindings {
    macro_rules! world {
        ($world:literal) => {
            wit_bindgen::generate!({
                path: "../../wit/operator@0.1.0",
                world: $world,
                pub_export_macro: true,
                export_macro_name: "export_guest",
                default_bindings_module: "::wasmop_guest::export::bindings",
            });
        };
    }
    #[cfg(not(any(feature = "admission", feature = "conversion")))]
    world!("operator-guest");
    #[cfg(all(feature = "admission", not(feature = "conversion")))]
    world!("admission-guest");
    #[cfg(all(feature = "conversion", not(feature = "admission")))]
    world!("conversion-guest");
    #[cfg(all(feature = "admission", feature = "conversion"))]
    world!("webhook-guest");
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
pub fn describe<O: Operator>(settings: Option<String>) -> Result<wit::Description, String> {
    report_panics();
    let Description {
        primary,
        children,
        finalizer,
        related,
    } = O::describe(&Settings::from_json(settings))?;
    Ok(wit::Description {
        primary: kind_ref(primary),
        children: children
            .into_iter()
            .map(
                |ChildKind {
                     kind,
                     cluster_scoped,
                 }| wit::ChildKind {
                    kind: kind_ref(kind),
                    cluster_scoped,
                },
            )
            .collect(),
        finalizer,
        related: related
            .into_iter()
            .map(
                |RelatedKind {
                     kind,
                     by,
                     metadata_only,
                 }| wit::RelatedKind {
                    kind: kind_ref(kind),
                    by: match by {
                        RelatedBy::NameAt(pointer) => wit::RelatedBy::NameAt(pointer),
                        RelatedBy::SelectorAt(pointer) => wit::RelatedBy::SelectorAt(pointer),
                        RelatedBy::Namespace => wit::RelatedBy::Namespace,
                    },
                    metadata_only,
                },
            )
            .collect(),
    })
}

/// `reconcile` for the operator `O`, in WIT types: wrap the request (nothing
/// is parsed before the guest asks), call the guest's logic, convert its
/// answer.
pub fn reconcile<O: Operator>(
    request: wit::ReconcileRequest,
) -> Result<wit::ReconcileResponse, wit::ReconcileError> {
    report_panics();
    let wit::ReconcileRequest {
        parent,
        observed,
        deleting,
        now,
        settings,
        related,
    } = request;
    let request = Request::from_wire(ReconcileRequest {
        parent,
        observed: observed.into_iter().map(observed_object).collect(),
        deleting,
        now,
        settings,
        related: related.into_iter().map(observed_object).collect(),
    });
    match O::reconcile(request).map(crate::Response::into_wire) {
        Ok(ReconcileResponse {
            children,
            status,
            requeue_after_seconds,
            finalized,
            events,
            keep,
        }) => Ok(wit::ReconcileResponse {
            children,
            status,
            requeue_after_seconds,
            finalized,
            events: events
                .into_iter()
                .map(
                    |Event {
                         event_type,
                         reason,
                         message,
                     }| wit::Event {
                        event_type: match event_type {
                            EventType::Normal => wit::EventType::Normal,
                            EventType::Warning => wit::EventType::Warning,
                        },
                        reason,
                        message,
                    },
                )
                .collect(),
            keep: keep
                .into_iter()
                .map(
                    |ObjectRef {
                         api_version,
                         kind,
                         name,
                     }| wit::ObjectRef {
                        api_version,
                        kind,
                        name,
                    },
                )
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

fn kind_ref(
    KindRef {
        group,
        version,
        kind,
    }: KindRef,
) -> wit::KindRef {
    wit::KindRef {
        group,
        version,
        kind,
    }
}

fn observed_object(
    wit::ObservedObject {
        api_version,
        kind,
        name,
        object,
    }: wit::ObservedObject,
) -> ObservedObject {
    ObservedObject {
        api_version,
        kind,
        name,
        object,
    }
}

#[cfg(feature = "admission")]
/// `admit` for the operator `O`, in WIT types.
pub fn admit<O: Admission>(review: wit::AdmissionReview) -> wit::AdmissionResponse {
    report_panics();
    let wit::AdmissionReview {
        operation,
        object,
        old_object,
        sub_resource,
        dry_run,
        username,
        groups,
        mutating,
        settings,
    } = review;
    let review = crate::Review::from_wire(crate::admission::AdmissionReview {
        operation: match operation {
            wit::Operation::Create => Operation::Create,
            wit::Operation::Update => Operation::Update,
            wit::Operation::Delete => Operation::Delete,
            wit::Operation::Connect => Operation::Connect,
        },
        object,
        old_object,
        sub_resource,
        dry_run,
        username,
        groups,
        mutating,
        settings,
    });
    let AdmissionResponse {
        allowed,
        message,
        code,
        patch,
        warnings,
    } = O::admit(&review);
    wit::AdmissionResponse {
        allowed,
        message,
        code,
        patch,
        warnings,
    }
}

#[cfg(feature = "conversion")]
/// `convert` for the operator `O`.
pub fn convert<O: Conversion>(
    objects: Vec<String>,
    desired_api_version: &str,
) -> Result<Vec<String>, String> {
    report_panics();
    O::convert_all(objects, desired_api_version)
}
