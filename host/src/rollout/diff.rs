//! Field-level differences between two JSON values, as JSON pointers with
//! the value before and after: what `wasmop plan` prints for a changed child
//! or status, and what a shadow comparison names as its first difference.

use serde_json::Value;

/// One field that differs.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Change {
    /// JSON pointer (RFC 6901) of the field.
    pub path: String,
    /// Its value before; absent when the field is new.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<Value>,
    /// Its value after; absent when the field goes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<Value>,
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let show = |v: &Option<Value>| v.as_ref().map_or_else(|| "(none)".to_owned(), short);
        write!(
            f,
            "{}: {} -> {}",
            self.path,
            show(&self.before),
            show(&self.after)
        )
    }
}

/// `value` as compact JSON, cut to 80 characters.
pub fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() <= 80 {
        return text;
    }
    let cut: String = text.chars().take(77).collect();
    format!("{cut}...")
}

/// Every field that differs between `before` and `after`, in pointer order:
/// objects key by key, arrays element by element (extra elements as added
/// or removed), anything else as a whole.
pub fn changes(before: &Value, after: &Value) -> Vec<Change> {
    let mut out = Vec::new();
    walk_until(
        &mut String::new(),
        Some(before),
        Some(after),
        &mut out,
        usize::MAX,
    );
    out
}

/// The first field that differs, if any (the walk stops there).
pub fn first(before: &Value, after: &Value) -> Option<Change> {
    let mut out = Vec::new();
    walk_until(&mut String::new(), Some(before), Some(after), &mut out, 1);
    out.pop()
}

/// A key as a JSON-pointer token, fit to show: `~` and `/` escaped, control
/// characters as `?`, at most [`MAX_KEY`] characters.
fn pointer_token(key: &str) -> String {
    let mut token: String = key
        .chars()
        .take(MAX_KEY)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if key.chars().count() > MAX_KEY {
        token.push_str("...");
    }
    token.replace('~', "~0").replace('/', "~1")
}

/// Longest key shown in a pointer.
const MAX_KEY: usize = 64;

/// Collects the changes between `before` and `after` under `path`, at
/// most `limit` of them.
fn walk_until(
    path: &mut String,
    before: Option<&Value>,
    after: Option<&Value>,
    out: &mut Vec<Change>,
    limit: usize,
) {
    if out.len() >= limit {
        return;
    }
    match (before, after) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                let len = path.len();
                path.push('/');
                path.push_str(&pointer_token(key));
                walk_until(path, a.get(key), b.get(key), out, limit);
                path.truncate(len);
            }
        }
        (Some(Value::Array(a)), Some(Value::Array(b))) => {
            for i in 0..a.len().max(b.len()) {
                let len = path.len();
                path.push('/');
                path.push_str(&i.to_string());
                walk_until(path, a.get(i), b.get(i), out, limit);
                path.truncate(len);
            }
        }
        (a, b) if a == b => {}
        (a, b) => out.push(Change {
            path: if path.is_empty() {
                "/".to_owned()
            } else {
                path.clone()
            },
            before: a.cloned(),
            after: b.cloned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn changed_added_and_removed_fields_are_named_by_pointer() {
        let before = json!({"spec": {"replicas": 3, "a/b": 1, "ports": [1, 2]}, "gone": true});
        let after = json!({"spec": {"replicas": 0, "a/b": 1, "ports": [1], "new": "x"}});
        let found: Vec<String> = changes(&before, &after)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            found,
            [
                "/gone: true -> (none)",
                "/spec/new: (none) -> \"x\"",
                "/spec/ports/1: 2 -> (none)",
                "/spec/replicas: 3 -> 0",
            ]
        );
        assert_eq!(first(&before, &before), None);
        assert_eq!(first(&json!(1), &json!(2)).unwrap().path, "/");
    }

    #[test]
    fn keys_a_guest_chose_are_shown_escaped_and_cut() {
        let long = "k".repeat(100);
        let before = json!({"a\nb": 1, long.clone(): 1});
        let after = json!({"a\nb": 2, long: 2});
        let found = changes(&before, &after);
        assert_eq!(found[0].path, "/a?b");
        assert_eq!(found[1].path.chars().count(), 1 + 64 + 3);
    }

    #[test]
    fn long_values_are_cut() {
        let long = Value::String("x".repeat(200));
        assert_eq!(short(&long).chars().count(), 80);
    }
}
