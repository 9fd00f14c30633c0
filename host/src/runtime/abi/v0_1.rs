//! `wasmop:operator@0.1.0` (`wit/operator@0.1.0/`): the generated worlds.
//! The contract's plain types are this version's records, so no adapter is
//! needed yet.

wasmtime::component::bindgen!({
    path: "../wit/operator@0.1.0",
    world: "operator-guest",
});

pub use wasmop::operator::log::Level;

/// The worlds with the optional exports: loading a module that has one
/// type-checks it against its world.
pub mod admission {
    wasmtime::component::bindgen!({ path: "../wit/operator@0.1.0", world: "admission-guest" });
}
/// See [`admission`].
pub mod conversion {
    wasmtime::component::bindgen!({ path: "../wit/operator@0.1.0", world: "conversion-guest" });
}
/// See [`admission`].
pub mod webhook {
    wasmtime::component::bindgen!({ path: "../wit/operator@0.1.0", world: "webhook-guest" });
}

/// Every record, variant and enum of the contract crate against the type
/// `bindgen!` generates from the WIT: each conversion names every field and
/// case on both sides, so a field or case that one side has and the other
/// lacks, or a type that differs, fails to compile; the round trips check
/// that each field lands in its namesake.
#[cfg(test)]
mod the_contract_agrees_with_the_wit {
    use wasmop_contract as c;

    use super::wasmop::operator::types as w;

    /// `$to` and `$back` for a record whose fields have the same type on
    /// both sides: the patterns and literals name every field, without `..`.
    macro_rules! record {
        ($to:ident, $back:ident, $t:ident { $($f:ident),* $(,)? }) => {
            fn $to(c::$t { $($f),* }: c::$t) -> w::$t {
                w::$t { $($f),* }
            }

            fn $back(w::$t { $($f),* }: w::$t) -> c::$t {
                c::$t { $($f),* }
            }
        };
    }

    /// `$to` and `$back` for an enum without payloads: each match names
    /// every case, without a wildcard.
    macro_rules! cases {
        ($to:ident, $back:ident, $t:ident { $($v:ident),* $(,)? }) => {
            fn $to(x: c::$t) -> w::$t {
                match x {
                    $(c::$t::$v => w::$t::$v),*
                }
            }

            fn $back(x: w::$t) -> c::$t {
                match x {
                    $(w::$t::$v => c::$t::$v),*
                }
            }
        };
    }

    record!(
        kind_ref,
        kind_ref_back,
        KindRef {
            group,
            version,
            kind
        }
    );
    record!(
        observed,
        observed_back,
        ObservedObject {
            api_version,
            kind,
            name,
            object
        }
    );
    record!(
        object_ref,
        object_ref_back,
        ObjectRef {
            api_version,
            kind,
            name
        }
    );
    record!(
        verdict,
        verdict_back,
        AdmissionResponse {
            allowed,
            message,
            code,
            patch,
            warnings
        }
    );
    cases!(event_type, event_type_back, EventType { Normal, Warning });
    cases!(
        error_kind,
        error_kind_back,
        ErrorKind {
            Retryable,
            Permanent
        }
    );
    cases!(
        operation,
        operation_back,
        Operation {
            Create,
            Update,
            Delete,
            Connect
        }
    );

    fn related_by(by: c::RelatedBy) -> w::RelatedBy {
        match by {
            c::RelatedBy::NameAt(at) => w::RelatedBy::NameAt(at),
            c::RelatedBy::SelectorAt(at) => w::RelatedBy::SelectorAt(at),
            c::RelatedBy::Namespace => w::RelatedBy::Namespace,
        }
    }

    fn related_by_back(by: w::RelatedBy) -> c::RelatedBy {
        match by {
            w::RelatedBy::NameAt(at) => c::RelatedBy::NameAt(at),
            w::RelatedBy::SelectorAt(at) => c::RelatedBy::SelectorAt(at),
            w::RelatedBy::Namespace => c::RelatedBy::Namespace,
        }
    }

    fn description(d: c::Description) -> w::Description {
        let c::Description {
            primary,
            children,
            finalizer,
            related,
        } = d;
        w::Description {
            primary: kind_ref(primary),
            children: children
                .into_iter()
                .map(
                    |c::ChildKind {
                         kind,
                         cluster_scoped,
                     }| w::ChildKind {
                        kind: kind_ref(kind),
                        cluster_scoped,
                    },
                )
                .collect(),
            finalizer,
            related: related
                .into_iter()
                .map(
                    |c::RelatedKind {
                         kind,
                         by,
                         metadata_only,
                     }| w::RelatedKind {
                        kind: kind_ref(kind),
                        by: related_by(by),
                        metadata_only,
                    },
                )
                .collect(),
        }
    }

    fn description_back(d: w::Description) -> c::Description {
        let w::Description {
            primary,
            children,
            finalizer,
            related,
        } = d;
        c::Description {
            primary: kind_ref_back(primary),
            children: children
                .into_iter()
                .map(
                    |w::ChildKind {
                         kind,
                         cluster_scoped,
                     }| c::ChildKind {
                        kind: kind_ref_back(kind),
                        cluster_scoped,
                    },
                )
                .collect(),
            finalizer,
            related: related
                .into_iter()
                .map(
                    |w::RelatedKind {
                         kind,
                         by,
                         metadata_only,
                     }| c::RelatedKind {
                        kind: kind_ref_back(kind),
                        by: related_by_back(by),
                        metadata_only,
                    },
                )
                .collect(),
        }
    }

    fn request(r: c::ReconcileRequest) -> w::ReconcileRequest {
        let c::ReconcileRequest {
            parent,
            observed: seen,
            deleting,
            now,
            settings,
            related,
        } = r;
        w::ReconcileRequest {
            parent,
            observed: seen.into_iter().map(observed).collect(),
            deleting,
            now,
            settings,
            related: related.into_iter().map(observed).collect(),
        }
    }

    fn request_back(r: w::ReconcileRequest) -> c::ReconcileRequest {
        let w::ReconcileRequest {
            parent,
            observed: seen,
            deleting,
            now,
            settings,
            related,
        } = r;
        c::ReconcileRequest {
            parent,
            observed: seen.into_iter().map(observed_back).collect(),
            deleting,
            now,
            settings,
            related: related.into_iter().map(observed_back).collect(),
        }
    }

    fn response(r: c::ReconcileResponse) -> w::ReconcileResponse {
        let c::ReconcileResponse {
            children,
            status,
            requeue_after_seconds,
            finalized,
            events,
            keep,
        } = r;
        w::ReconcileResponse {
            children,
            status,
            requeue_after_seconds,
            finalized,
            events: events
                .into_iter()
                .map(
                    |c::Event {
                         event_type: t,
                         reason,
                         message,
                     }| w::Event {
                        event_type: event_type(t),
                        reason,
                        message,
                    },
                )
                .collect(),
            keep: keep.into_iter().map(object_ref).collect(),
        }
    }

    fn response_back(r: w::ReconcileResponse) -> c::ReconcileResponse {
        let w::ReconcileResponse {
            children,
            status,
            requeue_after_seconds,
            finalized,
            events,
            keep,
        } = r;
        c::ReconcileResponse {
            children,
            status,
            requeue_after_seconds,
            finalized,
            events: events
                .into_iter()
                .map(
                    |w::Event {
                         event_type: t,
                         reason,
                         message,
                     }| c::Event {
                        event_type: event_type_back(t),
                        reason,
                        message,
                    },
                )
                .collect(),
            keep: keep.into_iter().map(object_ref_back).collect(),
        }
    }

    fn error(c::ReconcileError { kind, message }: c::ReconcileError) -> w::ReconcileError {
        w::ReconcileError {
            kind: error_kind(kind),
            message,
        }
    }

    fn error_back(w::ReconcileError { kind, message }: w::ReconcileError) -> c::ReconcileError {
        c::ReconcileError {
            kind: error_kind_back(kind),
            message,
        }
    }

    fn review(r: c::AdmissionReview) -> w::AdmissionReview {
        let c::AdmissionReview {
            operation: o,
            object,
            old_object,
            sub_resource,
            dry_run,
            username,
            groups,
            mutating,
            settings,
        } = r;
        w::AdmissionReview {
            operation: operation(o),
            object,
            old_object,
            sub_resource,
            dry_run,
            username,
            groups,
            mutating,
            settings,
        }
    }

    fn review_back(r: w::AdmissionReview) -> c::AdmissionReview {
        let w::AdmissionReview {
            operation: o,
            object,
            old_object,
            sub_resource,
            dry_run,
            username,
            groups,
            mutating,
            settings,
        } = r;
        c::AdmissionReview {
            operation: operation_back(o),
            object,
            old_object,
            sub_resource,
            dry_run,
            username,
            groups,
            mutating,
            settings,
        }
    }

    fn kind(n: u8) -> c::KindRef {
        c::KindRef {
            group: format!("g{n}"),
            version: format!("v{n}"),
            kind: format!("K{n}"),
        }
    }

    fn object(n: u8) -> c::ObservedObject {
        c::ObservedObject {
            api_version: format!("a{n}"),
            kind: format!("k{n}"),
            name: format!("n{n}"),
            object: format!("{{\"o\":{n}}}"),
        }
    }

    #[test]
    fn every_field_of_a_description_and_a_request_lands_in_its_namesake() {
        let d = c::Description {
            primary: kind(0),
            children: vec![c::ChildKind {
                kind: kind(1),
                cluster_scoped: true,
            }],
            finalizer: Some("f".into()),
            related: [
                c::RelatedBy::NameAt("/spec/a".into()),
                c::RelatedBy::SelectorAt("/spec/b".into()),
                c::RelatedBy::Namespace,
            ]
            .into_iter()
            .enumerate()
            .map(|(i, by)| c::RelatedKind {
                kind: kind(2 + i as u8),
                by,
                metadata_only: i == 1,
            })
            .collect(),
        };
        assert_eq!(description_back(description(d.clone())), d);
        let r = c::ReconcileRequest {
            parent: "{}".into(),
            observed: vec![object(1), object(2)],
            deleting: true,
            now: 7,
            settings: Some("s".into()),
            related: vec![object(3)],
        };
        assert_eq!(request_back(request(r.clone())), r);
    }

    #[test]
    fn every_field_of_an_answer_and_an_error_lands_in_its_namesake() {
        let r = c::ReconcileResponse {
            children: vec!["{}".into()],
            status: Some("{\"s\":1}".into()),
            requeue_after_seconds: Some(5),
            finalized: true,
            events: [c::EventType::Normal, c::EventType::Warning]
                .into_iter()
                .map(|event_type| c::Event {
                    event_type,
                    reason: "R".into(),
                    message: "m".into(),
                })
                .collect(),
            keep: vec![c::ObjectRef {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                name: "a".into(),
            }],
        };
        assert_eq!(response_back(response(r.clone())), r);
        for kind in [c::ErrorKind::Retryable, c::ErrorKind::Permanent] {
            let e = c::ReconcileError {
                kind,
                message: "m".into(),
            };
            assert_eq!(error_back(error(e.clone())), e);
        }
    }

    #[test]
    fn every_field_of_an_admission_review_and_verdict_lands_in_its_namesake() {
        for o in [
            c::Operation::Create,
            c::Operation::Update,
            c::Operation::Delete,
            c::Operation::Connect,
        ] {
            let r = c::AdmissionReview {
                operation: o,
                object: Some("{\"o\":1}".into()),
                old_object: Some("{\"o\":0}".into()),
                sub_resource: "status".into(),
                dry_run: true,
                username: "u".into(),
                groups: vec!["g".into()],
                mutating: true,
                settings: Some("s".into()),
            };
            assert_eq!(review_back(review(r.clone())), r);
        }
        let v = c::AdmissionResponse {
            allowed: true,
            message: "m".into(),
            code: Some(403),
            patch: Some("[]".into()),
            warnings: vec!["w".into()],
        };
        assert_eq!(verdict_back(verdict(v.clone())), v);
    }
}
