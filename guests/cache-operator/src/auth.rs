//! `spec.auth.secretRef`: the Secret key holding the cache server's
//! password, read from the request's related Secrets.
//!
//! The guest declares Secrets as a related kind named at
//! [`SECRET_NAME_POINTER`], so the host hands it the Secret the Cache names
//! and reconciles the Cache when that Secret appears, changes or goes. The
//! password itself reaches the pods through `valueFrom.secretKeyRef`; the
//! guest only needs to know that the key exists and a hash of its value
//! (with the host's default it receives the value's SHA-256, not the value).

use k8s_openapi::api::core::v1::Secret;
use serde::Deserialize;
use wasmop_guest::Request;

use crate::api::CacheSpec;

/// Where a Cache names its Secret (the related kind's JSON pointer).
pub const SECRET_NAME_POINTER: &str = "/spec/auth/secretRef/name";
/// The pod-template annotation holding the hash of the password's value; a
/// rotated Secret changes it and so rolls the pods.
pub const SECRET_HASH_ANNOTATION: &str = "apps.example.com/secret-hash";
/// The environment variable the pods get the password in.
pub const PASSWORD_ENV: &str = "CACHE_PASSWORD";

/// The password a Cache's pods get.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Password {
    /// The Cache asks for none.
    None,
    /// The Secret `name` has the `key`; `hash` is [`value_hash`] of its value.
    Found {
        /// The Secret's name.
        name: String,
        /// The key in its data.
        key: String,
        /// The value's hash, for [`SECRET_HASH_ANNOTATION`].
        hash: String,
    },
    /// The Secret or the key is missing; the message names them.
    Missing(String),
}

/// What of a Secret the guest reads: the values of its `data`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct SecretData {
    data: std::collections::BTreeMap<String, String>,
}

/// The password `spec` asks for, looked up among `request`'s related
/// Secrets.
pub fn password(request: &Request, spec: &CacheSpec) -> Password {
    let Some(auth) = &spec.auth else {
        return Password::None;
    };
    let (name, key) = (&auth.secret_ref.name, &auth.secret_ref.key);
    let Some(secret) = request.related_raw_named::<Secret>(name) else {
        return Password::Missing(format!(
            "Secret {name} (key {key}) does not exist in the Cache's namespace"
        ));
    };
    let data = SecretData::deserialize(secret).unwrap_or_default();
    match data.data.get(key) {
        Some(value) => Password::Found {
            name: name.clone(),
            key: key.clone(),
            hash: value_hash(value),
        },
        None => Password::Missing(format!("Secret {name} has no key {key}")),
    }
}

/// The 64-bit FNV-1a hash of a Secret value as the request carries it
/// (base64 of the value, or of its SHA-256 when the host conceals values),
/// as 16 hex digits: it changes whenever the value does.
pub fn value_hash(value: &str) -> String {
    use std::hash::Hasher;
    let mut hasher = fnv::FnvHasher::default();
    hasher.write(value.as_bytes());
    hex::encode(hasher.finish().to_be_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec() -> CacheSpec {
        serde_json::from_value(json!({"image": "redis",
            "auth": {"secretRef": {"name": "creds", "key": "password"}}}))
        .unwrap()
    }

    fn request(related: Vec<serde_json::Value>) -> Request {
        Request::new(json!({"metadata": {"name": "c"}}), vec![], false).with_related(related)
    }

    fn secret(data: serde_json::Value) -> serde_json::Value {
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"}, "data": data})
    }

    #[test]
    fn no_auth_asks_for_no_password() {
        let spec = CacheSpec::default();
        assert_eq!(password(&request(vec![]), &spec), Password::None);
    }

    #[test]
    fn a_missing_secret_or_key_is_named() {
        let Password::Missing(message) = password(&request(vec![]), &spec()) else {
            panic!("expected missing");
        };
        assert!(
            message.contains("Secret creds") && message.contains("password"),
            "{message}"
        );
        let other_key = request(vec![secret(json!({"user": "YQ=="}))]);
        assert_eq!(
            password(&other_key, &spec()),
            Password::Missing("Secret creds has no key password".into())
        );
    }

    #[test]
    fn a_found_key_hashes_its_value_and_a_rotation_changes_the_hash() {
        let found = |value: &str| match password(
            &request(vec![secret(json!({"password": value}))]),
            &spec(),
        ) {
            Password::Found { hash, .. } => hash,
            other => panic!("expected found, got {other:?}"),
        };
        assert_eq!(found("czNjcjN0"), found("czNjcjN0"));
        assert_ne!(found("czNjcjN0"), found("bmV3"));
    }
}
