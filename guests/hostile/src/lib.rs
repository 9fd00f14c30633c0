//! A deliberately hostile wasmop guest for the sandbox tests.
//!
//! It reconciles `test.wasmop.dev/v1alpha1` `Hostile` objects (CRD in
//! `guests/hostile/crd.yaml`) and declares ConfigMaps, Services and Secrets
//! as its children, with no finalizer; its setting `describe` makes it
//! describe something the host must refuse instead ([`describe`]). What a
//! reconcile does is chosen by the parent's `spec.attack` (`spec.target`
//! names the object an attack aims at):
//!
//! | attack | behaviour | the host must |
//! |---|---|---|
//! | `none` | ConfigMap `<name>-ok` with `{"ok":"true"}`, status `{"ok": true}` | apply it |
//! | `loop` | spins forever | stop it at the deadline |
//! | `memory` | fills 1 MiB blocks until allocation fails | cap its memory |
//! | `panic` | panics | contain the trap |
//! | `unreachable` | executes `unreachable` | contain the trap |
//! | `stack-overflow` | unbounded recursion | contain the trap |
//! | `huge-response` | a ConfigMap with 20 MiB of data (valid JSON) | refuse the size |
//! | `invalid-json` | a child that is not JSON | refuse it |
//! | `other-namespace` | a ConfigMap in `kube-system` | refuse it |
//! | `undeclared-kind` | a ClusterRoleBinding to cluster-admin | refuse it |
//! | `spoofed-owner` | a ConfigMap with a foreign ownerReference | refuse it |
//! | `spoofed-label` | a ConfigMap labelled `wasmop.dev/guest: someone-else` | refuse it |
//! | `read-file` | reads `/etc/hostname`, status `{"readFile": "ok: …" \| "error: …"}` | grant no files |
//! | `open-socket` | connects to `spec.target`, status `{"socket": "ok: …" \| "error: …"}` | grant no sockets |
//! | `env` | status `{"envVars": n, "args": m}` | grant no environment or args |
//! | `take-configmap` | a ConfigMap named `spec.target` | refuse a name it does not own (`ChildNameTaken`) |
//! | `take-service` | a Service named `spec.target` | refuse it (`ChildNameTaken`) |
//! | `take-secret` | a Secret named `spec.target` | refuse it (`ChildNameTaken`) |
//! | `null-labels`, `list-annotations`, `number-label`, `bad-label-key`, `host-label`, `host-annotation`, `server-metadata` | a ConfigMap whose metadata has that shape | refuse it |
//! | `event-flood` | 1000 events | refuse the answer |
//! | `event-reason` | an event reason with control characters | refuse the answer |
//! | `many-strings` | two million empty children | stop copying near the response limit |
//! | `recreate` | wants `<name>-flap` only while it is absent | refuse the re-creation (`ChildRecreated`) |
//! | `flap` | flips `<name>-flap` between two values | refuse the flip back (`ChildFlapping`) |
//! | `keep-and-desire` | keeps and desires the same child | refuse the answer |
//! | `claim-host-condition` | a status carrying `GuestReconciled` | strip it |
//! | `slow` | busy for 300 ms (the WASI clock), then as `none` | bound how many run at once |
//! | `http-get` | GET `spec.target` (a URL), status `{"http": "ok: <status> <body>" \| "error: …"}` | let out only what `allowedOutboundHosts` grants |
//! | `http-follow` | as `http-get`, then GET the `location` of a 3xx answer | check the redirect's target like any request |
//! | `http-flood` | GETs `spec.target` 200 times, status `{"http": "ok: <answered> refused: <refused>"}` | cap the requests of one call |
//! | `http-forged-trace` | GETs `spec.target` with a `traceparent` header of its own (trace `0af7651916cd43dd8448eb211c80319c`), status `{"http": "ok: <status>" \| "error: …"}` | send the host's trace context, not the guest's, when traces are on |
//! | `http-hoard` | builds 100,000 8 KiB header maps through `wasi:http` and keeps them, status `{"hoard": "<kept> kept; <error>"}` | bound what a guest keeps on the host side, outside its memory cap |
//! | `long-error` | fails (retryable) with a 2 MiB message of lines that look like the host's log lines | cut it to each sink's limit (Event note, condition, log line) and keep the log one line per record |
//! | `sleep` | sleeps an hour (the WASI clock) | stop it at the deadline, though it waits in the host |
//! | `bulk-slow` | busy 300 ms, then as `bulk` | (a slow shadow candidate beside `bulk`) |
//! | `ready` | as `none`, the status showing the condition `Ready` True | apply it |
//! | `fail-once-then-unready` | fails its first reconcile of a parent, then answers `Ready` False | as a canary candidate: roll it back once readiness breaks, though it failed less than allowed |
//! | `bulk` | 20 ConfigMaps of 190 KiB (an answer of 4 MB), the same every call | keep what it holds of the answers bounded in bytes (the shadow queue) |
//! | `wide-status` | a status of 40,000 fields | bound what `wasmop plan` lists and holds |
//! | `refused-bulk` | as `bulk`, each ConfigMap with a data key the API server refuses: every answer 4 MB, every request small | keep what it holds of the answers bounded in bytes (the shadow queue) |
//! | `refused-bulk-slow` | busy 300 ms, then as `refused-bulk` | (a slow shadow candidate beside `refused-bulk`) |
//! | `echo-related` | status `{"related": [...], "observedSecrets": [...]}`: every related object and observed child Secret it got, as it got them | hand it Secret values only with `secretValues: true` |
//!
//! The setting `attack` makes every reconcile make that attack instead:
//! the same module listed again with it is a rollout's candidate that
//! misbehaves where its stable version does not. An unknown attack is a
//! permanent error. `admit` and `convert` have attacks of their own
//! ([`webhooks`]).

pub mod attack;
pub mod authority;
pub mod bounds;
pub mod describe;
pub mod webhooks;

use serde_json::Value;
use wasmop_guest::{Description, Error, Operator, Request, Response, Result, Settings};

/// The primary kind's group.
pub const GROUP: &str = "test.wasmop.dev";
/// The primary kind's version.
pub const VERSION: &str = "v1alpha1";
/// The primary kind.
pub const KIND: &str = "Hostile";
/// Where `open-socket` connects when `spec.target` is absent: the API
/// server's usual local port.
pub const DEFAULT_TARGET: &str = "127.0.0.1:6443";

/// The hostile guest.
#[derive(Debug, Clone, Copy, Default)]
pub struct HostileGuest;

impl Operator for HostileGuest {
    fn describe(settings: &Settings) -> std::result::Result<Description, String> {
        describe::describe(settings)
    }

    fn reconcile(request: Request) -> Result<Response> {
        let name = request.parent_name().to_owned();
        let spec = |field: &str| {
            request
                .parent()
                .pointer(&format!("/spec/{field}"))
                .and_then(Value::as_str)
        };
        let forced = request
            .settings()
            .get::<describe::HostileSettings>()
            .ok()
            .and_then(|s| s.attack);
        let attack = forced.as_deref().or(spec("attack")).unwrap_or("none");
        let target = || spec("target").unwrap_or("missing-target");
        wasmop_guest::debug!("hostile {name}: attack {attack}");
        match attack {
            "none" => attack::none(&name),
            "loop" => attack::spin(),
            "memory" => attack::exhaust_memory(),
            "panic" => panic!("hostile guest panics on purpose"),
            "unreachable" => attack::unreachable(),
            "stack-overflow" => {
                let depth = attack::overflow_stack(0);
                Err(Error::permanent(format!(
                    "the stack did not overflow at depth {depth}"
                )))
            }
            "huge-response" => Ok(attack::huge_response(&name)),
            "invalid-json" => Ok(attack::invalid_json()),
            "other-namespace" => attack::other_namespace(&name),
            "undeclared-kind" => attack::undeclared_kind(&name),
            "spoofed-owner" => attack::spoofed_owner(&name),
            "spoofed-label" => attack::spoofed_label(&name),
            "read-file" => attack::read_file(&name),
            "open-socket" => attack::open_socket(&name, spec("target").unwrap_or(DEFAULT_TARGET)),
            "env" => attack::env(&name),
            "take-configmap" => authority::take_config_map(target()),
            "take-service" => authority::take_service(target()),
            "take-secret" => authority::take_secret(target()),
            "token-secret" => authority::token_secret(&name),
            odd @ ("null-labels" | "list-annotations" | "number-label" | "bad-label-key"
            | "host-label" | "host-annotation" | "server-metadata") => {
                authority::odd_metadata(&name, odd)
            }
            "event-flood" => authority::event_flood(&name, 1000),
            "event-reason" => authority::bad_event_reason(&name),
            "many-strings" => Ok(authority::many_strings()),
            "recreate" => authority::recreate(&request, &name),
            "flap" => authority::flap(&request, &name),
            "keep-and-desire" => authority::keep_and_desire(&name),
            "claim-host-condition" => authority::claim_host_condition(&name),
            "echo-related" => attack::echo_related(&request),
            "http-get" => attack::http_get(&name, target(), false),
            "http-follow" => attack::http_get(&name, target(), true),
            "http-flood" => attack::http_flood(&name, target(), 200),
            "http-hoard" => attack::http_hoard(&name),
            "http-forged-trace" => attack::http_forged_trace(&name, target()),
            "long-error" => Err(Error::retryable(attack::long_error())),
            "oversized-status" => attack::oversized_status(&name),
            "ready" => bounds::ready(&name),
            "fail-once-then-unready" => bounds::fail_once_then_unready(&request, &name),
            "bulk" => bounds::bulk(&name),
            "bulk-slow" => {
                attack::busy(std::time::Duration::from_millis(300));
                bounds::bulk(&name)
            }
            "wide-status" => bounds::wide_status(&name),
            "refused-bulk" => bounds::refused_bulk(&name),
            "refused-bulk-slow" => {
                attack::busy(std::time::Duration::from_millis(300));
                bounds::refused_bulk(&name)
            }
            "sleep" => {
                std::thread::sleep(std::time::Duration::from_secs(3600));
                attack::none(&name)
            }
            "slow" => {
                attack::busy(std::time::Duration::from_millis(300));
                attack::none(&name)
            }
            other => Err(Error::permanent(format!("unknown attack {other:?}"))),
        }
    }
}

#[cfg(target_arch = "wasm32")]
impl wasmop_guest::Admission for HostileGuest {
    fn admit(review: &wasmop_guest::Review) -> wasmop_guest::admission::AdmissionResponse {
        webhooks::admit(review)
    }
}

impl wasmop_guest::Conversion for HostileGuest {
    fn convert(object: Value, desired_api_version: &str) -> std::result::Result<Value, String> {
        webhooks::convert(object, desired_api_version)
    }

    fn convert_all(
        objects: Vec<String>,
        desired_api_version: &str,
    ) -> std::result::Result<Vec<String>, String> {
        webhooks::convert_all(objects, desired_api_version)
    }
}

wasmop_guest::export_operator!(HostileGuest);

#[cfg(test)]
mod tests;
