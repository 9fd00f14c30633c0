//! wasmop: one generic Kubernetes operator host, operator logic in
//! sandboxed WebAssembly components.
//!
//! The data flow, one module each:
//!
//! ```text
//! source (guest list ConfigMap, --guest files)
//!    └─> runtime (compile, cache, InstancePre, sandbox, limits)
//!           └─> host (start / swap / stop guests)
//!                  └─> controller: watch -> queue -> reconcile
//!                         reconcile: guest call -> validate -> apply -> status -> events
//! ```
//!
//! `render` runs one reconcile offline; `rbac` prints the least-privilege
//! roles for a set of guests; `cli` wires the `wasmop` binary; `client`
//! builds the API clients (counted, and fenced by `leader`'s election);
//! `protected` holds the host's own objects, which no guest may write;
//! `telemetry` the metrics and logs, `server` the endpoints (metrics,
//! probes and what they report, the webhooks' HTTPS), `webhook` the
//! admission and conversion answered by guests, `memory` the allocator's settings,
//! `settings` the per-guest settings the guest list sets, `retry` the
//! watches' retry schedule. Each module imports only the layers below its
//! own (ARCHITECTURE.md; checked by `host/tests/layers.rs`).

pub mod app;
pub mod build;
pub mod cases;
pub mod claims;
pub mod cli;

pub mod client;
pub mod controller;
pub mod events;
pub mod host;
pub mod leader;
pub mod memory;
pub mod metacontroller;
pub mod model;
pub mod plan;
pub mod protected;
pub mod rbac;
pub mod render;
pub mod retry;
pub mod rollout;
pub mod runtime;
pub mod scaffold;
pub mod secrets;
pub mod server;
pub mod settings;
pub mod sink;
pub mod source;
pub mod telemetry;
pub mod validate;
pub mod webhook;
