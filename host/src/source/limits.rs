//! How much a module source may hand the host.

/// Largest module accepted from any source. A Rust guest component is
/// typically 0.1–2 MiB, a TypeScript or Python one 12–18 MiB; a ConfigMap
/// cannot hold more than ~1 MiB.
pub const MAX_MODULE_BYTES: u64 = 64 << 20;
