//! Guest lists as the tests write them: typed entries, written out as the
//! YAML a user puts in the guest-list ConfigMap.

use serde_json::{Map, Value, json};

/// One entry of a guest list.
#[derive(Clone, Debug)]
pub struct Entry(Map<String, Value>);

impl Entry {
    fn with_module(name: &str, module: Value) -> Self {
        let mut fields = Map::new();
        fields.insert("name".into(), name.into());
        fields.insert("module".into(), module);
        Self(fields)
    }

    /// A guest whose module is the key `module.wasm` of the ConfigMap
    /// `config_map`.
    pub fn config_map(name: &str, config_map: &str) -> Self {
        Self::with_module(
            name,
            json!({"configMap": {"name": config_map, "key": "module.wasm"}}),
        )
    }

    /// The hostile guest, its module in the ConfigMap `hostile-module`,
    /// watching `namespace`.
    pub fn hostile(namespace: &str) -> Self {
        Self::config_map("hostile", "hostile-module").namespaces([namespace])
    }

    /// The cache-operator, its module in the ConfigMap `cache-module`,
    /// watching `namespace`.
    pub fn cache_operator(namespace: &str) -> Self {
        Self::config_map("cache-operator", "cache-module").namespaces([namespace])
    }

    /// A guest whose module is the file at `path`.
    pub fn file(name: &str, path: &str) -> Self {
        Self::with_module(name, json!({"file": path}))
    }

    /// A guest whose module is pulled from an OCI registry.
    pub fn oci(name: &str, reference: &str) -> Self {
        Self::with_module(name, json!({"oci": reference}))
    }

    /// A guest whose module is fetched from `url`, checked against
    /// `sha256`.
    pub fn url(name: &str, url: &str, sha256: &str) -> Self {
        Self::with_module(name, json!({"url": url})).with("sha256", sha256)
    }

    /// The namespaces the guest watches.
    pub fn namespaces<S: AsRef<str>>(self, namespaces: impl IntoIterator<Item = S>) -> Self {
        let namespaces: Vec<Value> = namespaces.into_iter().map(|n| n.as_ref().into()).collect();
        self.with("namespaces", namespaces)
    }

    /// Sets the entry's field `key` (`timeout`, `settings`, `rollout`...).
    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.0.insert(key.into(), value.into());
        self
    }
}

impl Entry {
    /// The entry without its field `key`.
    pub fn without(mut self, key: &str) -> Self {
        self.0.remove(key);
        self
    }
}

/// A guest list: its entries in order.
#[derive(Clone, Debug, Default)]
pub struct GuestList(Vec<Entry>);

impl GuestList {
    /// A list of `entries`.
    pub fn of(entries: impl IntoIterator<Item = Entry>) -> Self {
        Self(entries.into_iter().collect())
    }

    /// The list with `entry` added at its end.
    pub fn and(mut self, entry: Entry) -> Self {
        self.0.push(entry);
        self
    }

    /// `guests.yaml` as the host reads it.
    pub fn yaml(&self) -> String {
        let entries: Vec<Value> = self.0.iter().map(|e| Value::Object(e.0.clone())).collect();
        serde_saphyr::to_string(&json!({ "guests": entries })).expect("a guest list serialises")
    }
}
