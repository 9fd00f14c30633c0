//! The names the host stamps and records, each defined once
//! (interface contract where marked).

/// Every label and annotation key under this prefix is the host's alone: a
/// guest's child that sets one is refused.
pub const HOST_PREFIX: &str = "wasmop.dev/";

/// The label the host stamps on every child with the owning guest's name
/// (interface contract).
pub const GUEST_LABEL: &str = "wasmop.dev/guest";

/// The label the host keeps on every parent of a guest with several shards,
/// and stamps on each child it applies for that parent: the parent's shard,
/// `0` to `shards - 1` (interface contract).
pub const SHARD_LABEL: &str = "wasmop.dev/shard";

/// The annotation holding the hash of what the host last applied for a
/// child: its record of the guest's wish.
pub const DESIRED_HASH_ANNOTATION: &str = "wasmop.dev/desired-hash";

/// The condition the host maintains on every parent's status: `False` with
/// the reason after a host-side failure, `True` again after the next
/// success. It is the host's alone: the host removes it from a guest's
/// desired status, so a guest neither carries nor drops it.
pub const HOST_CONDITION: &str = "GuestReconciled";

/// The reporting controller of every Event the host records.
pub const REPORTER: &str = "wasmop";

/// Whether `key` (a label or annotation key) is reserved for the host.
pub fn is_host_key(key: &str) -> bool {
    key.strip_prefix(HOST_PREFIX).is_some()
        || key
            .split_once('/')
            .is_some_and(|(prefix, _)| prefix == "wasmop.dev" || prefix.ends_with(".wasmop.dev"))
}

/// The field manager a guest's children and status are applied with.
pub fn field_manager(guest: &str) -> String {
    format!("wasmop-{guest}")
}

/// The field manager of the host's own condition on a guest's parents.
pub fn host_field_manager(guest: &str) -> String {
    format!("wasmop-host-{guest}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_under_the_host_prefix_and_its_subdomains_are_the_hosts() {
        assert!(is_host_key(GUEST_LABEL));
        assert!(is_host_key("wasmop.dev/anything"));
        assert!(is_host_key("x.wasmop.dev/anything"));
        assert!(!is_host_key("app"));
        assert!(!is_host_key("example.com/wasmop.dev"));
        assert!(!is_host_key("notwasmop.dev/x"));
    }
}
