//! Metacontroller's controllers on wasmop: a `CompositeController` and its
//! hooks, unchanged, as one guest (`wasmop metacontroller build`).
//!
//! A hook guest exports `wasmop:metacontroller/hooks` (`wit/metacontroller@0.1.0`):
//! its definition and a way to call each hook in-process. The host does
//! what Metacontroller does around the hooks, here, once for every
//! language: [`definition`] reads the definition as Metacontroller
//! publishes it and makes it the guest's description; [`sync`] builds each
//! hook's request from a reconcile's request and turns the hook's answer
//! into the reconcile's answer (children by their update strategies,
//! status, finalizer, resync). From there the guest is reconciled, checked,
//! rolled out and observed as any other.

pub mod definition;
pub mod sync;

pub use definition::Controller;
