//! What "the answer contains the expectation" means: a subset match that
//! reports the first difference as a path and both values.
//!
//! - An object matches when every key it has is in the answer and matches;
//!   a key whose value is `null` matches an answer without that key (so
//!   `conditions: null` says "no conditions").
//! - A list of objects that all carry `type` (conditions) or all carry
//!   `name` (containers, ports, env) matches when each listed element has
//!   a partner with the same `type` or `name`; other elements may exist.
//! - Any other list matches element by element and must be as long.
//! - Numbers match by value (2 and 2.0 are equal); other scalars by
//!   equality.

use std::fmt;

use serde_json::Value;

/// The first place where the answer does not contain the expectation.
#[derive(Clone, Debug, PartialEq)]
pub struct Difference {
    /// Where, e.g. `status.conditions[type=Ready].status`.
    pub path: String,
    /// What the case expects there.
    pub expected: String,
    /// What the answer has there.
    pub actual: String,
}

impl Difference {
    /// A difference at `path` between two descriptions.
    pub fn new(
        path: impl Into<String>,
        expected: impl Into<String>,
        actual: impl Into<String>,
    ) -> Self {
        Self {
            path: path.into(),
            expected: expected.into(),
            actual: actual.into(),
        }
    }
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: expected {}, got {}",
            self.path, self.expected, self.actual
        )
    }
}

/// `value` as one line of JSON, cut at 200 characters.
pub fn show(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(200) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// Checks that `actual` contains `expected`; `path` names where both are.
pub fn contains(path: &str, expected: &Value, actual: &Value) -> Result<(), Difference> {
    match (expected, actual) {
        (Value::Object(want), Value::Object(have)) => {
            for (key, want) in want {
                let here = join(path, key);
                match have.get(key) {
                    Some(have) => contains(&here, want, have)?,
                    None if want.is_null() => {}
                    None => return Err(Difference::new(here, show(want), "nothing")),
                }
            }
            Ok(())
        }
        (Value::Array(want), Value::Array(have)) => match list_key(want) {
            Some(key) => {
                for item in want {
                    let id = &item[key];
                    let here = format!("{path}[{key}={}]", plain(id));
                    match have.iter().find(|h| h.get(key) == Some(id)) {
                        Some(partner) => contains(&here, item, partner)?,
                        None => return Err(Difference::new(here, show(item), "nothing")),
                    }
                }
                Ok(())
            }
            None => {
                if want.len() != have.len() {
                    return Err(Difference::new(
                        path,
                        items(want.len()),
                        format!("{} ({})", items(have.len()), show(actual)),
                    ));
                }
                for (i, (want, have)) in want.iter().zip(have).enumerate() {
                    contains(&format!("{path}[{i}]"), want, have)?;
                }
                Ok(())
            }
        },
        (Value::Number(want), Value::Number(have)) if want.as_f64() == have.as_f64() => Ok(()),
        (want, have) if want == have => Ok(()),
        (want, have) => Err(Difference::new(path, show(want), show(have))),
    }
}

/// The key a list's elements are matched by: `type` when every element
/// is an object with one, else `name`; none for other lists.
fn list_key(list: &[Value]) -> Option<&'static str> {
    if list.is_empty() {
        return None;
    }
    ["type", "name"].into_iter().find(|key| {
        list.iter()
            .all(|item| item.get(key).is_some_and(|v| v.is_string()))
    })
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

fn items(n: usize) -> String {
    if n == 1 {
        "1 item".into()
    } else {
        format!("{n} items")
    }
}

/// A string as itself, anything else as JSON.
pub fn plain(value: &Value) -> String {
    value
        .as_str()
        .map_or_else(|| value.to_string(), str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_subset_of_an_object_matches_and_a_missing_key_is_named() {
        let actual = json!({"spec": {"replicas": 2, "template": {"x": 1}}, "kind": "Deployment"});
        assert_eq!(
            contains("", &json!({"spec": {"replicas": 2.0}}), &actual),
            Ok(())
        );
        let e = contains("child", &json!({"spec": {"paused": true}}), &actual).unwrap_err();
        assert_eq!(
            e.to_string(),
            "child.spec.paused: expected true, got nothing"
        );
        assert_eq!(contains("", &json!({"status": null}), &actual), Ok(()));
        let e = contains("", &json!({"kind": null}), &actual).unwrap_err();
        assert_eq!(e.to_string(), r#"kind: expected null, got "Deployment""#);
        let e = contains("", &json!({"spec": {"replicas": 3}}), &actual).unwrap_err();
        assert_eq!(e.to_string(), "spec.replicas: expected 3, got 2");
    }

    #[test]
    fn conditions_match_by_type_and_named_lists_by_name() {
        let status = json!({"conditions": [
            {"type": "Available", "status": "True"},
            {"type": "Ready", "status": "False", "reason": "Paused"}]});
        let want = json!({"conditions": [{"type": "Ready", "reason": "Paused"}]});
        assert_eq!(contains("status", &want, &status), Ok(()));
        let want = json!({"conditions": [{"type": "Ready", "reason": "Running"}]});
        assert_eq!(
            contains("status", &want, &status).unwrap_err().to_string(),
            r#"status.conditions[type=Ready].reason: expected "Running", got "Paused""#
        );
        let want = json!({"conditions": [{"type": "Upgrading"}]});
        assert_eq!(
            contains("status", &want, &status).unwrap_err().path,
            "status.conditions[type=Upgrading]"
        );
        let containers = json!([{"name": "redis", "image": "redis:7.2"}, {"name": "exporter"}]);
        assert_eq!(
            contains(
                "c",
                &json!([{"name": "redis", "image": "redis:7.2"}]),
                &containers
            ),
            Ok(())
        );
    }

    #[test]
    fn other_lists_match_element_by_element_and_in_length() {
        let args = json!(["--maxmemory", "64mb"]);
        assert_eq!(
            contains("args", &json!(["--maxmemory", "64mb"]), &args),
            Ok(())
        );
        let e = contains("args", &json!(["--maxmemory"]), &args).unwrap_err();
        assert_eq!(e.path, "args");
        assert_eq!(e.expected, "1 item");
        let e = contains("args", &json!(["--maxmemory", "32mb"]), &args).unwrap_err();
        assert_eq!(e.to_string(), r#"args[1]: expected "32mb", got "64mb""#);
    }

    #[test]
    fn long_values_are_cut() {
        let long = json!("x".repeat(500));
        assert!(show(&long).chars().count() <= 201);
    }
}
