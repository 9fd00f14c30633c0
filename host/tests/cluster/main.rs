//! The cluster suites: the `wasmop` binary end to end on a real control
//! plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
//! kwok, from `wasmop_testenv`), one module per area, as wasmtime's
//! `tests/all` holds its integration tests. The binary links the host once
//! and starts one control plane, which every test shares, each in
//! namespaces of its own and, where a host would act on a cluster-wide
//! object (a CRD's conversion, a webhook configuration, a claim on a kind),
//! under an API group or a guest name of its own.
//!
//! A test is named `<module>::<name>`, and a case run once per language
//! `<module>::<language>::<name>`, so that one name filter selects a module
//! (`sandbox::`) or a language's cases of one (`cache_operator::rust::`).
//! The tests that cannot share the control plane or the machine run after
//! the others, one at a time (`#[alone]` in a module's list).
//!
//! The fault suite (`host/tests/faults.rs`), which kills and pauses the control
//! plane, is a binary of its own.

#[path = "../support/mod.rs"]
mod support;

use wasmop_testenv::harness::run;

mod authority;
mod bounds;
mod cache_operator;
mod helm;
mod hot_swap;
mod metacontroller;
mod monitoring;
mod oci;
mod outbound;
mod production;
mod related;
mod rollouts;
mod sandbox;
mod shards;
mod signatures;
mod upgrade;
mod webhooks;

/// Every module's tests, named `<module>::<test>`.
macro_rules! tests_of {
    ($($module:ident),* $(,)?) => {{
        let mut all = Vec::new();
        $(all.extend(
            $module::tests()
                .into_iter()
                .map(|test| test.in_module(stringify!($module))),
        );)*
        all
    }};
}

fn main() -> std::process::ExitCode {
    // The test threads take the tests in this order: the modules whose
    // tests take longest first, so that the run does not end waiting on
    // one of them.
    run(tests_of![
        outbound,
        upgrade,
        metacontroller,
        cache_operator,
        rollouts,
        authority,
        bounds,
        webhooks,
        shards,
        hot_swap,
        oci,
        signatures,
        monitoring,
        production,
        sandbox,
        related,
        helm,
    ])
}
