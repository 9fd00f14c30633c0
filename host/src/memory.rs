//! The process allocator's settings, for a host that holds thousands of
//! objects for days.
//!
//! glibc's malloc gives each thread that allocates its own arena (up to
//! eight per core) and returns freed memory to the kernel only from the top
//! of each arena. Compiling a guest (Cranelift on several threads), the
//! initial lists and every reconcile's request leave freed pages in the
//! middle of those arenas, freed but resident. So the host uses one arena
//! (threads keep their small-allocation cache, `tcache`, so they rarely
//! wait on its lock) and returns free pages after each compile and every
//! half minute (docs/decisions/0035-one-malloc-arena-trimmed.md).
//!
//! Other C libraries (the image's static musl binary) have no arenas and no
//! `malloc_trim`; there both functions do nothing.

use std::time::Duration;

/// How often freed memory is handed back to the kernel.
pub const TRIM_EVERY: Duration = Duration::from_secs(30);

/// Limits malloc to one arena. Call before any thread starts.
pub fn limit_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code)]
    // SAFETY: mallopt only changes the allocator's parameters; called
    // before other threads exist.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// Returns the allocator's free pages to the kernel (a walk over the free
/// lists, milliseconds for a heap of a few hundred MiB).
pub fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code)]
    // SAFETY: malloc_trim is thread-safe and touches only free memory.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Trims every [`TRIM_EVERY`], on the blocking pool, for as long as the
/// runtime runs.
pub async fn trim_periodically() {
    let mut ticks = tokio::time::interval(TRIM_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let _ = tokio::task::spawn_blocking(trim).await;
    }
}
