//! One admission request: the API server's `AdmissionReview` in, the
//! guest's verdict checked, the review answered.
//!
//! A verdict is hostile until checked: a denial's code must be an HTTP
//! error status, warnings are bounded, and a patch may change only the
//! object's spec-like content and the labels and annotations that are not
//! the host's. A verdict that breaks a rule is a guest failure, answered as
//! the guest's `admissionFailurePolicy` says.

use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse as KubeResponse, Operation};
use serde_json::Value;
use wasmop_contract::names::is_host_key;
use wasmop_contract::{AdmissionResponse, AdmissionReview};

/// The most warnings a verdict may carry.
pub const MAX_WARNINGS: usize = 16;
/// The longest warning, in bytes.
pub const MAX_WARNING_BYTES: usize = 256;
/// The longest message kept, in bytes.
pub const MAX_MESSAGE_BYTES: usize = 1024;
/// The most operations a patch may hold.
pub const MAX_PATCH_OPERATIONS: usize = 4096;
/// How deep a value a patch adds, replaces or copies may land: its path's
/// depth and its own nesting.
pub const MAX_PATCH_DEPTH: usize = 128;

/// What applying a guest's patch may cost: the work is the guest's, so it
/// is bounded by the guest's own limits.
#[derive(Clone, Copy, Debug)]
pub struct PatchBounds {
    /// The most bytes the patched object may reach (about its JSON size):
    /// the guest's `maxResponseBytes`.
    pub max_bytes: usize,
    /// When applying must have finished: the guest's deadline, from when
    /// the application started.
    pub deadline: std::time::Duration,
}

impl PatchBounds {
    /// The bounds of a guest under `limits`.
    pub fn of(limits: &crate::runtime::Limits) -> Self {
        Self {
            max_bytes: limits.max_response_bytes,
            deadline: limits.timeout,
        }
    }
}

/// Why a verdict is refused.
#[derive(Debug, thiserror::Error)]
pub enum VerdictError {
    /// A denial's code is not 400–599.
    #[error("the denial's code {0} is not an HTTP error status (400-599)")]
    Code(u16),
    /// Too many or too long warnings.
    #[error("{0}")]
    Warnings(String),
    /// The patch is not a JSON Patch or does not apply.
    #[error("the patch {0}")]
    Patch(String),
    /// The patch changes what a guest may not change.
    #[error("the patch changes {0}, which an admission patch may not change")]
    Forbidden(String),
}

/// The request as the guest sees it.
pub fn review(
    request: &AdmissionRequest<DynamicObject>,
    mutating: bool,
    settings: Option<&str>,
) -> AdmissionReview {
    let text = |o: &Option<DynamicObject>| {
        o.as_ref()
            .map(|o| serde_json::to_string(o).expect("an object serialises"))
    };
    AdmissionReview {
        operation: match request.operation {
            Operation::Create => wasmop_contract::Operation::Create,
            Operation::Update => wasmop_contract::Operation::Update,
            Operation::Delete => wasmop_contract::Operation::Delete,
            Operation::Connect => wasmop_contract::Operation::Connect,
        },
        object: text(&request.object),
        old_object: text(&request.old_object),
        sub_resource: request.sub_resource.clone().unwrap_or_default(),
        dry_run: request.dry_run,
        username: request.user_info.username.clone().unwrap_or_default(),
        groups: request.user_info.groups.clone().unwrap_or_default(),
        mutating,
        settings: settings.map(str::to_owned),
    }
}

/// The answer to the API server for the guest's `verdict`, or why the
/// verdict is refused. `mutating` says whether its patch is applied.
pub fn answer(
    request: &AdmissionRequest<DynamicObject>,
    verdict: AdmissionResponse,
    mutating: bool,
    bounds: PatchBounds,
) -> Result<KubeResponse, VerdictError> {
    if verdict.warnings.len() > MAX_WARNINGS {
        return Err(VerdictError::Warnings(format!(
            "{} warnings, at most {MAX_WARNINGS}",
            verdict.warnings.len()
        )));
    }
    if let Some(long) = verdict
        .warnings
        .iter()
        .find(|w| w.len() > MAX_WARNING_BYTES)
    {
        return Err(VerdictError::Warnings(format!(
            "a warning of {} bytes, at most {MAX_WARNING_BYTES}",
            long.len()
        )));
    }
    let mut response = KubeResponse::from(request);
    if !verdict.warnings.is_empty() {
        response.warnings = Some(verdict.warnings);
    }
    if !verdict.allowed {
        let code = verdict.code.unwrap_or(403);
        if !(400..=599).contains(&code) {
            return Err(VerdictError::Code(code));
        }
        let mut response = response.deny(truncate(&verdict.message, MAX_MESSAGE_BYTES));
        response.result.code = code;
        response.result.reason = reason_for(code).to_owned();
        return Ok(response);
    }
    match (&verdict.patch, mutating, &request.object) {
        (Some(patch), true, Some(object)) => {
            let patch = checked_patch(object, patch, bounds)?;
            response
                .with_patch(patch)
                .map_err(|e| VerdictError::Patch(e.to_string()))
        }
        _ => Ok(response),
    }
}

/// The `reason` of a Status for `code`, as the API server names it.
fn reason_for(code: u16) -> &'static str {
    match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        409 => "Conflict",
        422 => "Invalid",
        429 => "TooManyRequests",
        500..=599 => "InternalError",
        _ => "",
    }
}

/// `patch` parsed, applied to `object` within `bounds` and checked: at
/// most [`MAX_PATCH_OPERATIONS`] operations, applied one at a time while
/// the object's size (counting every value a patch adds or copies, never
/// what it removes) stays within `bounds.max_bytes` and the time within
/// `bounds.deadline`, so a small patch of copies cannot make the host
/// build a huge object, nor a long one hold a thread.
fn checked_patch(
    object: &DynamicObject,
    patch: &str,
    bounds: PatchBounds,
) -> Result<json_patch::Patch, VerdictError> {
    let parsed: json_patch::Patch = serde_json::from_str(patch)
        .map_err(|e| VerdictError::Patch(format!("is not a JSON Patch: {e}")))?;
    if parsed.0.len() > MAX_PATCH_OPERATIONS {
        return Err(VerdictError::Patch(format!(
            "has {} operations, at most {MAX_PATCH_OPERATIONS}",
            parsed.0.len()
        )));
    }
    let started = std::time::Instant::now();
    let before = serde_json::to_value(object).expect("an object serialises");
    let mut after = before.clone();
    let mut bytes = json_measure(&after).bytes;
    for op in &parsed.0 {
        use json_patch::PatchOperation as Op;
        let added = match op {
            Op::Add(add) => Some(json_measure(&add.value)),
            Op::Replace(replace) => Some(json_measure(&replace.value)),
            Op::Copy(copy) => after.pointer(copy.from.as_str()).map(json_measure),
            Op::Remove(_) | Op::Move(_) | Op::Test(_) => None,
        };
        if let Some(added) = added {
            // A copy into its own subtree doubles the nesting each time:
            // how deep a value lands is bounded, so nothing the host walks
            // later (compare, clone, drop) recurses without bound.
            let depth = op.path().count() + added.depth;
            if depth > MAX_PATCH_DEPTH {
                return Err(VerdictError::Patch(format!(
                    "nests a value {depth} levels deep, at most {MAX_PATCH_DEPTH}"
                )));
            }
            bytes += added.bytes;
        }
        if bytes > bounds.max_bytes {
            return Err(VerdictError::Patch(format!(
                "makes the object larger than the guest's maxResponseBytes ({} bytes)",
                bounds.max_bytes
            )));
        }
        json_patch::patch(&mut after, std::slice::from_ref(op))
            .map_err(|e| VerdictError::Patch(format!("does not apply: {e}")))?;
        if started.elapsed() > bounds.deadline {
            return Err(VerdictError::Patch(format!(
                "takes longer to apply than the guest's deadline ({:?})",
                bounds.deadline
            )));
        }
    }
    check_changes(&before, &after)?;
    Ok(parsed)
}

/// What a value costs the host: about its size in memory (its JSON text,
/// and [`NODE_BYTES`] for each array and object, which cost far more in
/// memory than their two brackets) and how deeply it nests.
struct Measure {
    bytes: usize,
    depth: usize,
}

/// What one array or object is charged beyond its contents.
const NODE_BYTES: usize = 64;

/// [`Measure`] of `value`, walked without recursion.
fn json_measure(value: &Value) -> Measure {
    let mut measure = Measure { bytes: 0, depth: 0 };
    let mut stack = vec![(value, 1usize)];
    while let Some((value, depth)) = stack.pop() {
        measure.depth = measure.depth.max(depth);
        measure.bytes += match value {
            Value::Null | Value::Bool(_) => 5,
            Value::Number(_) => 20,
            Value::String(s) => s.len() + 2,
            Value::Array(items) => {
                stack.extend(items.iter().map(|v| (v, depth + 1)));
                NODE_BYTES + items.len()
            }
            Value::Object(map) => {
                stack.extend(map.values().map(|v| (v, depth + 1)));
                NODE_BYTES + map.keys().map(|k| k.len() + 4).sum::<usize>()
            }
        };
    }
    measure
}

/// What a patch may change: anything but `apiVersion`, `kind`, `status`
/// and `metadata`, and in `metadata` only labels and annotations that are
/// not the host's (`wasmop.dev/`).
pub fn check_changes(before: &Value, after: &Value) -> Result<(), VerdictError> {
    let (Some(b), Some(a)) = (before.as_object(), after.as_object()) else {
        return Err(VerdictError::Forbidden(
            "the object into a non-object".into(),
        ));
    };
    for field in ["apiVersion", "kind", "status"] {
        if b.get(field) != a.get(field) {
            return Err(VerdictError::Forbidden(field.into()));
        }
    }
    let empty = serde_json::Map::new();
    let meta = |o: &serde_json::Map<String, Value>| -> Result<serde_json::Map<String, Value>, VerdictError> {
        match o.get("metadata") {
            None => Ok(empty.clone()),
            Some(Value::Object(m)) => Ok(m.clone()),
            Some(_) => Err(VerdictError::Forbidden("metadata into a non-object".into())),
        }
    };
    let (mb, ma) = (meta(b)?, meta(a)?);
    for key in mb.keys().chain(ma.keys()) {
        if key == "labels" || key == "annotations" {
            continue;
        }
        if mb.get(key) != ma.get(key) {
            return Err(VerdictError::Forbidden(format!("metadata.{key}")));
        }
    }
    for field in ["labels", "annotations"] {
        let map = |m: &serde_json::Map<String, Value>| -> Result<serde_json::Map<String, Value>, VerdictError> {
            match m.get(field) {
                None | Some(Value::Null) => Ok(serde_json::Map::new()),
                Some(Value::Object(m)) => Ok(m.clone()),
                Some(_) => Err(VerdictError::Forbidden(format!("metadata.{field} into a non-map"))),
            }
        };
        let (lb, la) = (map(&mb)?, map(&ma)?);
        for key in lb.keys().chain(la.keys()) {
            if is_host_key(key) && lb.get(key) != la.get(key) {
                return Err(VerdictError::Forbidden(format!(
                    "metadata.{field} key {key:?}"
                )));
            }
        }
    }
    Ok(())
}

/// `text` cut to at most `max` bytes at a character boundary.
pub fn truncate(text: &str, max: usize) -> String {
    text[..text.floor_char_boundary(max)].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(object: Value) -> AdmissionRequest<DynamicObject> {
        let review: kube::core::admission::AdmissionReview<DynamicObject> =
            serde_json::from_value(json!({
                "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "request": {"uid": "u1", "kind": {"group": "g.io", "version": "v1", "kind": "K"},
                    "resource": {"group": "g.io", "version": "v1", "resource": "ks"},
                    "operation": "CREATE", "userInfo": {"username": "alice", "groups": ["devs"]},
                    "object": object, "oldObject": null, "dryRun": false}
            }))
            .unwrap();
        review.try_into().unwrap()
    }

    fn object() -> Value {
        json!({"apiVersion": "g.io/v1", "kind": "K",
            "metadata": {"name": "a", "namespace": "n", "labels": {"x": "1", "wasmop.dev/guest": "g"}},
            "spec": {"image": "redis"}})
    }

    const BOUNDS: PatchBounds = PatchBounds {
        max_bytes: 4 << 20,
        deadline: std::time::Duration::from_secs(1),
    };

    #[test]
    fn a_patch_that_grows_the_object_past_the_guests_limit_is_refused() {
        let request = request(object());
        // Each copy of /spec/v into its own subtree nests it deeper.
        let mut deep = vec![json!({"op": "add", "path": "/spec/v", "value": {"v": {"v": {}}}})];
        for k in 1..=20 {
            let path = format!("/spec/v{}", "/c".repeat(k));
            deep.push(json!({"op": "copy", "from": "/spec/v", "path": path}));
        }
        let unbounded = PatchBounds {
            max_bytes: usize::MAX,
            ..BOUNDS
        };
        let err = answer(&request, verdict(Value::Array(deep)), true, unbounded).unwrap_err();
        assert!(err.to_string().contains("levels deep"), "{err}");
        // Each copy doubles the spec: 40 of them would be a terabyte.
        let mut ops = vec![json!({"op": "add", "path": "/spec/x0", "value": "x".repeat(1000)})];
        for i in 1..40 {
            ops.push(json!({"op": "copy", "from": "/spec", "path": format!("/spec/x{i}")}));
        }
        let err = answer(&request, verdict(Value::Array(ops)), true, BOUNDS).unwrap_err();
        assert!(err.to_string().contains("maxResponseBytes"), "{err}");
        let many: Vec<Value> = (0..=MAX_PATCH_OPERATIONS)
            .map(|_| json!({"op": "test", "path": "/kind", "value": "K"}))
            .collect();
        let err = answer(&request, verdict(Value::Array(many)), true, BOUNDS).unwrap_err();
        assert!(err.to_string().contains("at most 4096"), "{err}");
        let slow = PatchBounds {
            deadline: std::time::Duration::ZERO,
            ..BOUNDS
        };
        let one = json!([{"op": "add", "path": "/spec/a", "value": 1}]);
        let err = answer(&request, verdict(one), true, slow).unwrap_err();
        assert!(err.to_string().contains("deadline"), "{err}");
    }

    fn verdict(patch: Value) -> AdmissionResponse {
        AdmissionResponse {
            patch: Some(patch.to_string()),
            ..AdmissionResponse::allow()
        }
    }

    #[test]
    fn the_guest_sees_the_request() {
        let review = review(&request(object()), true, Some("{}"));
        assert_eq!(review.operation, wasmop_contract::Operation::Create);
        assert_eq!(review.username, "alice");
        assert_eq!(review.groups, ["devs"]);
        let object: Value = serde_json::from_str(review.object.as_deref().unwrap()).unwrap();
        assert_eq!(object["spec"]["image"], "redis");
        assert!(review.old_object.is_none() && review.mutating);
    }

    #[test]
    fn a_spec_patch_is_passed_on_only_when_mutating() {
        let request = request(object());
        let v = verdict(json!([{"op": "add", "path": "/spec/port", "value": 1}]));
        let answer = answer(&request, v.clone(), true, BOUNDS).unwrap();
        assert!(answer.allowed && answer.patch.is_some());
        assert_eq!(answer.uid, "u1");
        let plain = super::answer(&request, v, false, BOUNDS).unwrap();
        assert!(plain.allowed && plain.patch.is_none());
        let labels = verdict(json!([{"op": "add", "path": "/metadata/labels/y", "value": "2"}]));
        assert!(super::answer(&request, labels, true, BOUNDS).is_ok());
    }

    #[test]
    fn hostile_patches_are_refused_naming_what_they_touch() {
        let request = request(object());
        for (patch, says) in [
            (
                json!([{"op": "replace", "path": "/kind", "value": "Secret"}]),
                "kind",
            ),
            (
                json!([{"op": "replace", "path": "/metadata/name", "value": "b"}]),
                "metadata.name",
            ),
            (
                json!([{"op": "add", "path": "/metadata/ownerReferences", "value": []}]),
                "metadata.ownerReferences",
            ),
            (
                json!([{"op": "add", "path": "/metadata/finalizers", "value": ["x/y"]}]),
                "metadata.finalizers",
            ),
            (
                json!([{"op": "remove", "path": "/metadata/labels/wasmop.dev~1guest"}]),
                "wasmop.dev/guest",
            ),
            (
                json!([{"op": "add", "path": "/metadata/annotations", "value": {"wasmop.dev/desired-hash": "0"}}]),
                "wasmop.dev/desired-hash",
            ),
            (
                json!([{"op": "add", "path": "/status", "value": {"phase": "Ready"}}]),
                "status",
            ),
            (
                json!([{"op": "remove", "path": "/spec/missing"}]),
                "does not apply",
            ),
            (json!({"op": "add"}), "not a JSON Patch"),
        ] {
            let err = answer(&request, verdict(patch.clone()), true, BOUNDS).unwrap_err();
            assert!(err.to_string().contains(says), "{patch}: {err}");
        }
        let text = AdmissionResponse {
            patch: Some("not json".into()),
            ..AdmissionResponse::allow()
        };
        assert!(answer(&request, text, true, BOUNDS).is_err());
    }

    #[test]
    fn denials_keep_a_bounded_message_and_an_error_code() {
        let request = request(object());
        let deny = AdmissionResponse {
            code: Some(422),
            ..AdmissionResponse::deny("é".repeat(2000))
        };
        let answer = answer(&request, deny, true, BOUNDS).unwrap();
        assert!(!answer.allowed);
        assert_eq!(answer.result.code, 422);
        assert!(answer.result.message.len() <= MAX_MESSAGE_BYTES);
        assert_eq!(
            super::answer(&request, AdmissionResponse::deny("no"), true, BOUNDS)
                .unwrap()
                .result
                .code,
            403
        );
        for code in [200, 302, 600, 0] {
            let bad = AdmissionResponse {
                code: Some(code),
                ..AdmissionResponse::deny("no")
            };
            assert!(
                super::answer(&request, bad, true, BOUNDS).is_err(),
                "{code}"
            );
        }
        let many = AdmissionResponse {
            warnings: vec!["w".into(); MAX_WARNINGS + 1],
            ..AdmissionResponse::allow()
        };
        assert!(super::answer(&request, many, true, BOUNDS).is_err());
        let long = AdmissionResponse {
            warnings: vec!["w".repeat(MAX_WARNING_BYTES + 1)],
            ..AdmissionResponse::allow()
        };
        assert!(super::answer(&request, long, true, BOUNDS).is_err());
    }
}
