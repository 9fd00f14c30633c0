//! The guest list: the `guests.yaml` key of the guests ConfigMap
//! (interface contract).
//!
//! ```yaml
//! guests:
//!   - name: cache-operator
//!     module:
//!       configMap: {name: cache-operator-module, key: module.wasm}
//!     sha256: 3f1c…            # optional for configMap, file and oci, required for url
//!     concurrency: 10          # optional settings, defaults shown
//!     timeout: 1s
//!     memoryLimit: 64Mi
//!     maxResponseBytes: 4Mi
//!     maxChildren: 100
//!     maxEvents: 16
//!     namespaces: []           # empty: all namespaces
//!     resync: 10m
//!     shards: 1                # split the parents over this many shards (1..=64)
//!     adoptOrphans: false      # adopt existing objects no controller owns (never Secrets)
//!     secretValues: false      # hand the guest Secret values, not their SHA-256
//!     admissionFailurePolicy: Fail  # Fail|Ignore: what a failed admit answers
//!     settings: {}             # any YAML value, handed to the guest
//!     allowedOutboundHosts: []  # what a guest importing wasi:http may call:
//!                              # "https://registry.example.com", "http://10.0.0.7:8089",
//!                              # "https://*.example.com"; empty: nothing
//!     rollout:                 # how a new module reaches the parents (crate::rollout)
//!       strategy: Canary       # Immediate (default) | Shadow | Canary
//!       steps: [10, 50]
//!       stepDuration: 60s
//!       maxFailedReconciles: 0
//!       readyCondition: Ready
//!       progressDeadline: 2m
//!   - name: from-registry
//!     module:
//!       oci: registry.example.com/ops/cache:v1   # or …@sha256:<digest>
//!     ociPollInterval: 1m      # how often a tag is resolved again
//!     pullSecret: regcred      # a kubernetes.io/dockerconfigjson Secret here
//!     insecure: false          # plain HTTP to this registry
//!     verify:                  # a signature by one of these keys (crate::source::signature)
//!       keys: ["-----BEGIN PUBLIC KEY-----\n…"]
//!   - name: signed-file
//!     module: {file: /modules/op.wasm}
//!     verify:
//!       keys: ["-----BEGIN PUBLIC KEY-----\n…"]
//!       bundle: {file: /modules/op.wasm.bundle}  # what `cosign sign-blob --bundle` wrote
//! ```

use std::collections::HashSet;
use std::time::Duration;

use serde::Deserialize;

use crate::runtime::Limits;
use crate::runtime::capabilities::http::OutboundHosts;
use crate::runtime::limits::parse_duration;
use crate::settings::ControllerSettings;
use crate::validate::names;

/// The ConfigMap data key holding the list (interface contract).
pub const LIST_KEY: &str = "guests.yaml";

/// Errors in the guest list.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Not YAML of the expected shape.
    #[error("invalid {LIST_KEY}: {0}")]
    Yaml(String),
    /// A semantic problem with an entry.
    #[error("invalid guest entry {name:?}: {reason}")]
    Entry {
        /// The entry's name.
        name: String,
        /// What is wrong.
        reason: String,
    },
}

/// The parsed `guests.yaml`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct GuestList {
    /// The guests to run.
    #[serde(default)]
    pub guests: Vec<GuestEntry>,
}

/// Where a module's bytes are.
#[derive(Clone, Debug, Deserialize, serde::Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum ModuleSource {
    /// A `binaryData` key of a ConfigMap in the list's namespace.
    ConfigMap {
        /// ConfigMap name.
        name: String,
        /// Key in `binaryData`.
        key: String,
    },
    /// A file in the host's filesystem (a mounted volume).
    File(String),
    /// An http or https URL (requires `sha256`).
    Url(String),
    /// A wasm artifact in an OCI registry: `<registry>/<repository>:<tag>`
    /// or `…@sha256:<digest>`.
    Oci(String),
}

/// One guest of the list.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GuestEntry {
    /// Guest name: a DNS label, used in the `wasmop.dev/guest` label.
    pub name: String,
    /// Exactly one source.
    pub module: ModuleSource,
    /// Expected sha256 of the module (hex), verified when present.
    #[serde(default)]
    pub sha256: Option<String>,
    /// Reconciles at once (default 10).
    #[serde(default)]
    pub concurrency: Option<u16>,
    /// Deadline of one guest call, e.g. `1s`, `500ms` (default 1s).
    #[serde(default)]
    pub timeout: Option<String>,
    /// Linear memory cap, e.g. `64Mi` (default 64Mi).
    #[serde(default)]
    pub memory_limit: Option<String>,
    /// Response size cap, e.g. `4Mi` (default 4Mi).
    #[serde(default)]
    pub max_response_bytes: Option<String>,
    /// Most desired children per response (default 100).
    #[serde(default)]
    pub max_children: Option<usize>,
    /// Most Events per response (default 16).
    #[serde(default)]
    pub max_events: Option<usize>,
    /// Kinds that grant power (RBAC, admission, CRDs, Namespaces, ...) the
    /// guest may declare as children or related kinds, as `<Kind>.<group>`
    /// (`<Kind>` for the core group). Default none.
    #[serde(default)]
    pub privileged_kinds: Vec<String>,
    /// The guest's own budget of API requests a second (default: none).
    #[serde(default, rename = "apiQPS")]
    pub api_qps: Option<f64>,
    /// The requests of the guest that may go at once within its `apiQPS`
    /// (default: `apiQPS` rounded up).
    #[serde(default, rename = "apiBurst")]
    pub api_burst: Option<u32>,
    /// Most related objects per request (default 256).
    #[serde(default)]
    pub max_related_objects: Option<usize>,
    /// Most bytes of related objects per request, e.g. `4Mi` (default 4Mi).
    #[serde(default)]
    pub max_related_bytes: Option<String>,
    /// Whether a desired child may adopt an existing object no controller
    /// owns (never a Secret). Default false.
    #[serde(default)]
    pub adopt_orphans: Option<bool>,
    /// Whether the guest gets the values of the Secrets it sees (children
    /// and related); by default it gets each value's SHA-256. Default
    /// false.
    #[serde(default)]
    pub secret_values: Option<bool>,
    /// What the API server does when the guest's `admit` fails: `Fail`
    /// (deny, the default) or `Ignore` (admit with a warning).
    #[serde(default)]
    pub admission_failure_policy: Option<crate::settings::FailurePolicy>,
    /// The guest's own settings: any YAML value, handed to `describe` and to
    /// every reconcile as JSON.
    #[serde(default)]
    pub settings: Option<serde_json::Value>,
    /// Namespaces to watch (default: all).
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// Resync period, e.g. `10m` (default 10m).
    #[serde(default)]
    pub resync: Option<String>,
    /// How many shards the parents are split into, 1 to
    /// [`crate::settings::MAX_SHARDS`] (default 1).
    #[serde(default)]
    pub shards: Option<u16>,
    /// For an `oci` tag: how often it is resolved again, e.g. `30s`
    /// (default 1m).
    #[serde(default)]
    pub oci_poll_interval: Option<String>,
    /// For `oci`: a `kubernetes.io/dockerconfigjson` Secret in the list's
    /// namespace holding the registry's credentials.
    #[serde(default)]
    pub pull_secret: Option<String>,
    /// For `oci`: reach the registry over plain HTTP. Default false.
    #[serde(default)]
    pub insecure: Option<bool>,
    /// What a guest that imports `wasi:http` may call: `scheme://host[:port]`
    /// entries (see [`crate::runtime::capabilities::http::allow`]). Default: nothing.
    #[serde(default)]
    pub allowed_outbound_hosts: Vec<String>,
    /// How a new module version reaches the parents: at once (default),
    /// shadowed, or step by step.
    #[serde(default)]
    pub rollout: Option<crate::rollout::RolloutEntry>,
    /// The signature the module must carry: by which keys, and for a
    /// `url`, `file` or `configMap` module where its bundle is.
    #[serde(default)]
    pub verify: Option<VerifyEntry>,
}

/// The signature an entry's module must carry (`verify`; see
/// [`super::signature`]).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VerifyEntry {
    /// PEM public keys, one or more per item; none: the host's
    /// `--trusted-keys`.
    #[serde(default)]
    pub keys: Vec<String>,
    /// Where a `url`, `file` or `configMap` module's bundle is, with the
    /// forms of `module`.
    #[serde(default)]
    pub bundle: Option<ModuleSource>,
}

/// An `oci` entry's reference and how to reach its registry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OciEntry {
    /// The reference as listed.
    pub reference: String,
    /// Plain HTTP.
    pub insecure: bool,
    /// The pull Secret's name.
    pub pull_secret: Option<String>,
    /// How often a tag is resolved again.
    pub poll_interval: Duration,
}

impl GuestList {
    /// Parses and checks the `guests.yaml` text.
    pub fn parse(text: &str) -> Result<Self, Error> {
        let list: GuestList =
            serde_saphyr::from_str(text).map_err(|e| Error::Yaml(e.to_string()))?;
        let mut seen = HashSet::new();
        // The units' Lease names, less the lease name and its dash.
        let mut units: HashSet<String> = HashSet::new();
        for entry in &list.guests {
            let bad = |reason: String| Error::Entry {
                name: entry.name.clone(),
                reason,
            };
            check_guest_name(&entry.name).map_err(bad)?;
            if !seen.insert(entry.name.as_str()) {
                return Err(bad("listed twice".into()));
            }
            if let ModuleSource::Url(url) = &entry.module {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(bad(format!("url {url:?} must be http or https")));
                }
                if entry.sha256.is_none() {
                    return Err(bad("a url module requires sha256".into()));
                }
            }
            entry.oci().map_err(bad)?;
            entry.check_verify().map_err(bad)?;
            if let Some(d) = &entry.sha256
                && (d.len() != 64 || !d.bytes().all(|b| b.is_ascii_hexdigit()))
            {
                return Err(bad("sha256 must be 64 hex digits".into()));
            }
            entry.limits().map_err(bad)?;
            let controller = entry.controller().map_err(bad)?;
            entry.settings_json().map_err(bad)?;
            let rollout = entry.rollout_settings().map_err(bad)?;
            // A rollout's verdict counts the candidate's failures where it
            // is driven, the holder of shard 0: the other shards' would go
            // uncounted.
            if controller.shards > 1 && rollout.is_progressive() {
                return Err(bad(
                    "shards above 1 take the Immediate rollout only: a Shadow or Canary verdict would not see the other shards' failures"
                        .into(),
                ));
            }
            // Each unit has a Lease of its own: one shared by two units, or
            // taken for a replica's, would let two replicas write for one.
            let shards = (controller.shards > 1).then_some(0..controller.shards);
            let names: Vec<String> = match shards {
                Some(range) => range.map(|k| format!("{}-{k}", entry.name)).collect(),
                None => vec![entry.name.clone()],
            };
            for unit in names {
                if unit.starts_with("replica-") {
                    return Err(bad(format!(
                        "its unit's Lease `<lease name>-{unit}` is named like a replica's Lease: rename the guest"
                    )));
                }
                if !units.insert(unit.clone()) {
                    return Err(bad(format!(
                        "its unit's Lease `<lease name>-{unit}` is another guest's unit's too: rename one of the guests"
                    )));
                }
            }
        }
        Ok(list)
    }
}

impl GuestEntry {
    /// The `oci` source and its settings; none for other sources, which may
    /// not carry OCI settings.
    pub fn oci(&self) -> Result<Option<OciEntry>, String> {
        let ModuleSource::Oci(reference) = &self.module else {
            if self.oci_poll_interval.is_some()
                || self.pull_secret.is_some()
                || self.insecure.is_some()
            {
                return Err(
                    "ociPollInterval, pullSecret and insecure apply to an oci module only".into(),
                );
            }
            return Ok(None);
        };
        super::oci::parse_reference(reference)?;
        let poll_interval = self
            .oci_poll_interval
            .as_deref()
            .map(parse_duration)
            .transpose()?
            .unwrap_or(super::oci::DEFAULT_POLL_INTERVAL);
        if poll_interval < Duration::from_secs(1) {
            return Err("ociPollInterval must be at least 1s".into());
        }
        if let Some(secret) = &self.pull_secret {
            names::dns_subdomain(secret)
                .map_err(|why| format!("pullSecret {secret:?} is not a Secret name: {why}"))?;
        }
        Ok(Some(OciEntry {
            reference: reference.clone(),
            insecure: self.insecure.unwrap_or(false),
            pull_secret: self.pull_secret.clone(),
            poll_interval,
        }))
    }

    /// Checks `verify`: its keys parse, and a bundle is named where the
    /// module's source has no place for signatures (all but `oci`).
    fn check_verify(&self) -> Result<(), String> {
        let Some(verify) = &self.verify else {
            return Ok(());
        };
        super::signature::Keys::parse(verify.keys.iter().map(String::as_str))
            .map_err(|e| format!("verify.keys: {e}"))?;
        match (&self.module, &verify.bundle) {
            (ModuleSource::Oci(_), Some(_)) => Err(
                "verify.bundle applies to url, file and configMap modules: an oci module's signatures are found beside it in its registry"
                    .into(),
            ),
            (ModuleSource::Oci(_), None) => Ok(()),
            (_, None) => Err(
                "verify.bundle is required for a url, file or configMap module: name the bundle `cosign sign-blob --bundle` wrote, as module is named"
                    .into(),
            ),
            (_, Some(ModuleSource::Oci(_))) => {
                Err("verify.bundle takes file, url or configMap, not oci".into())
            }
            (_, Some(ModuleSource::Url(url)))
                if !(url.starts_with("http://") || url.starts_with("https://")) =>
            {
                Err(format!("verify.bundle url {url:?} must be http or https"))
            }
            (_, Some(_)) => Ok(()),
        }
    }

    /// The rollout settings, defaults filled in.
    pub fn rollout_settings(&self) -> Result<crate::rollout::RolloutSettings, String> {
        self.rollout.as_ref().map_or_else(
            || Ok(Default::default()),
            crate::rollout::RolloutEntry::settings,
        )
    }

    /// The sandbox limits, defaults filled in.
    pub fn limits(&self) -> Result<Limits, String> {
        let d = Limits::default();
        Ok(Limits {
            timeout: self
                .timeout
                .as_deref()
                .map(parse_duration)
                .transpose()?
                .unwrap_or(d.timeout),
            memory_bytes: self
                .memory_limit
                .as_deref()
                .map(parse_bytes)
                .transpose()?
                .unwrap_or(d.memory_bytes),
            max_response_bytes: self
                .max_response_bytes
                .as_deref()
                .map(parse_bytes)
                .transpose()?
                .unwrap_or(d.max_response_bytes),
            max_children: self.max_children.unwrap_or(d.max_children),
            max_events: self.max_events.unwrap_or(d.max_events),
            max_related_objects: self.max_related_objects.unwrap_or(d.max_related_objects),
            max_related_bytes: self
                .max_related_bytes
                .as_deref()
                .map(parse_bytes)
                .transpose()?
                .unwrap_or(d.max_related_bytes),
            outbound: std::sync::Arc::new(
                OutboundHosts::parse(&self.allowed_outbound_hosts).map_err(|e| e.to_string())?,
            ),
            privileged: std::sync::Arc::new(crate::validate::description::PrivilegedKinds::Named(
                self.privileged_kinds.iter().cloned().collect(),
            )),
        })
    }

    /// The guest's own settings as JSON text, or none when the entry has
    /// none (or `settings: null`).
    pub fn settings_json(&self) -> Result<Option<String>, String> {
        let Some(value) = self.settings.as_ref().filter(|v| !v.is_null()) else {
            return Ok(None);
        };
        crate::settings::settings_text(value).map(Some)
    }

    /// The controller settings, defaults filled in.
    pub fn controller(&self) -> Result<ControllerSettings, String> {
        let d = ControllerSettings::default();
        let resync: Duration = self
            .resync
            .as_deref()
            .map(parse_duration)
            .transpose()?
            .unwrap_or(d.resync);
        if resync.is_zero() {
            return Err("resync must be positive".into());
        }
        let api_budget = match (self.api_qps, self.api_burst) {
            (None, None) => None,
            (None, Some(_)) => return Err("apiBurst needs apiQPS".into()),
            (Some(qps), burst) => Some(crate::settings::ApiBudget::new(qps, burst)?),
        };
        let shards = self.shards.unwrap_or(d.shards);
        if !(1..=crate::settings::MAX_SHARDS).contains(&shards) {
            return Err(format!(
                "shards must be between 1 and {}, got {shards}",
                crate::settings::MAX_SHARDS
            ));
        }
        Ok(ControllerSettings {
            api_budget,
            shards,
            concurrency: self.concurrency.unwrap_or(d.concurrency).max(1),
            resync,
            namespaces: self.namespaces.clone(),
            adopt_orphans: self.adopt_orphans.unwrap_or(d.adopt_orphans),
            secret_values: self.secret_values.unwrap_or(d.secret_values),
            admission_failure_policy: self
                .admission_failure_policy
                .unwrap_or(d.admission_failure_policy),
        })
    }
}

/// The entry the stable module of a rollout `record` is fetched again as:
/// the recorded source, checked as the list's own entries are, and the
/// recorded digest, which the fetched bytes must match. Whoever may write
/// the status ConfigMap may write the guest list beside it, so the record
/// names no module the list's writers could not name; the checks keep a
/// malformed record from doing anything but fail.
pub fn stable_entry(
    entry: &GuestEntry,
    record: &crate::rollout::Record,
) -> Result<GuestEntry, String> {
    let source = record
        .stable_source
        .clone()
        .ok_or_else(|| "the record names no source for it".to_owned())?;
    let module: ModuleSource = serde_json::from_value(source)
        .map_err(|e| format!("the recorded source is not a module source: {e}"))?;
    let oci = matches!(module, ModuleSource::Oci(_));
    let stable = GuestEntry {
        name: format!("{}.stable", entry.name),
        module,
        sha256: Some(record.stable.clone()),
        oci_poll_interval: entry.oci_poll_interval.clone().filter(|_| oci),
        pull_secret: entry.pull_secret.clone().filter(|_| oci),
        insecure: entry.insecure.filter(|_| oci),
        ..entry.clone()
    };
    if let ModuleSource::Url(url) = &stable.module
        && !(url.starts_with("http://") || url.starts_with("https://"))
    {
        return Err(format!("the recorded url {url:?} is not http or https"));
    }
    if record.stable.len() != 64 || !record.stable.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err("the recorded digest is not 64 hex digits".into());
    }
    stable.oci()?;
    Ok(stable)
}

/// Parses `65536`, `64Ki`, `64Mi`, `1Gi` (Kubernetes binary suffixes).
pub fn parse_bytes(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: usize = number
        .parse()
        .map_err(|_| format!("invalid size {text:?}"))?;
    let shift = match unit {
        "" => 0,
        "Ki" => 10,
        "Mi" => 20,
        "Gi" => 30,
        _ => return Err(format!("invalid size unit in {text:?} (use Ki, Mi or Gi)")),
    };
    n.checked_shl(shift)
        .filter(|v| v >> shift == n)
        .ok_or_else(|| format!("size {text:?} too large"))
}

/// A guest name must be a DNS label: it becomes a label value and part of
/// field manager names. The same rule holds for `--guest name=…`.
pub fn check_guest_name(name: &str) -> Result<(), String> {
    names::dns_label(name).map_err(|why| {
        format!("guest name {name:?} is not a DNS label (lowercase letters, digits and '-', at most 63): {why}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_list_parses_with_settings() {
        let list = GuestList::parse(
            r#"
guests:
  - name: cache-operator
    module:
      configMap: {name: cache-module, key: module.wasm}
    concurrency: 8
    timeout: 500ms
    memoryLimit: 32Mi
    namespaces: [team-a]
    resync: 1m
    adoptOrphans: true
    secretValues: true
    maxEvents: 4
    maxRelatedObjects: 32
    maxRelatedBytes: 1Mi
    privilegedKinds: [Namespace, Role.rbac.authorization.k8s.io]
    apiQPS: 2.5
    apiBurst: 4
    settings:
      defaultImage: redis:7
      list: [1, two]
  - name: from-file
    module:
      file: /modules/op.wasm
  - name: from-url
    module:
      url: https://example.com/op.wasm
    sha256: 0000000000000000000000000000000000000000000000000000000000000000
"#,
        )
        .unwrap();
        assert_eq!(list.guests.len(), 3);
        let e = &list.guests[0];
        assert_eq!(
            e.module,
            ModuleSource::ConfigMap {
                name: "cache-module".into(),
                key: "module.wasm".into()
            }
        );
        assert_eq!(e.limits().unwrap().timeout, Duration::from_millis(500));
        assert_eq!(e.limits().unwrap().memory_bytes, 32 << 20);
        assert_eq!(e.controller().unwrap().concurrency, 8);
        assert_eq!(e.controller().unwrap().resync, Duration::from_secs(60));
        assert!(e.controller().unwrap().adopt_orphans);
        assert!(e.controller().unwrap().secret_values);
        assert_eq!(e.limits().unwrap().max_events, 4);
        assert_eq!(e.limits().unwrap().max_related_objects, 32);
        assert_eq!(
            e.controller().unwrap().api_budget,
            Some(crate::settings::ApiBudget {
                milli_qps: 2500,
                burst: 4
            })
        );
        assert_eq!(list.guests[1].controller().unwrap().api_budget, None);
        assert_eq!(e.limits().unwrap().max_related_bytes, 1 << 20);
        assert!(
            e.limits()
                .unwrap()
                .privileged
                .allows(&crate::model::KindRef::new(
                    "rbac.authorization.k8s.io",
                    "v1",
                    "Role"
                ))
        );
        assert_eq!(
            e.settings_json().unwrap().as_deref(),
            Some(r#"{"defaultImage":"redis:7","list":[1,"two"]}"#)
        );
        assert_eq!(list.guests[1].limits().unwrap(), Limits::default());
        assert_eq!(list.guests[1].settings_json().unwrap(), None);
    }

    #[test]
    fn a_url_without_digest_and_broken_yaml_are_refused() {
        let err = GuestList::parse(
            "guests:\n  - name: x\n    module:\n      url: https://e.com/x.wasm\n",
        )
        .unwrap_err();
        assert!(err.to_string().contains("requires sha256"), "{err}");
        assert!(GuestList::parse("guests: [").is_err());
        assert!(GuestList::parse("guests:\n  - name: x\n    module: {file: a, url: b}\n").is_err());
        assert!(GuestList::parse("guests:\n  - name: Bad_Name\n    module: {file: a}\n").is_err());
        let huge = format!(
            "guests:\n  - name: x\n    module: {{file: a}}\n    settings: {{blob: {}}}\n",
            "x".repeat(crate::settings::MAX_SETTINGS_BYTES)
        );
        let err = GuestList::parse(&huge).unwrap_err();
        assert!(err.to_string().contains("settings are"), "{err}");
    }

    #[test]
    fn shards_default_to_one_and_out_of_range_counts_are_refused() {
        let shards = |extra: &str| {
            GuestList::parse(&format!(
                "guests:\n  - name: x\n    module: {{file: a}}\n{extra}"
            ))
            .map(|list| list.guests[0].controller().unwrap().shards)
        };
        assert_eq!(shards("").unwrap(), 1);
        assert_eq!(shards("    shards: 3\n").unwrap(), 3);
        assert_eq!(shards("    shards: 64\n").unwrap(), 64);
        let err =
            shards("    shards: 2\n    rollout: {strategy: Canary, steps: [50]}\n").unwrap_err();
        assert!(err.to_string().contains("Immediate rollout only"), "{err}");
        for bad in ["0", "65"] {
            let err = shards(&format!("    shards: {bad}\n")).unwrap_err();
            assert!(
                err.to_string().contains("shards must be between 1 and 64"),
                "{err}"
            );
        }
    }

    #[test]
    fn two_units_of_one_lease_name_and_a_unit_named_like_a_replica_are_refused() {
        let list = |entries: &str| GuestList::parse(&format!("guests:\n{entries}"));
        let entry = |name: &str, shards: u16| {
            format!("  - name: {name}\n    module: {{file: a}}\n    shards: {shards}\n")
        };
        let err = list(&(entry("cache", 3) + &entry("cache-2", 1))).unwrap_err();
        assert!(
            err.to_string()
                .contains("`<lease name>-cache-2` is another guest's"),
            "{err}"
        );
        let err = list(&(entry("cache-1", 1) + &entry("cache", 2))).unwrap_err();
        assert!(err.to_string().contains("`<lease name>-cache-1`"), "{err}");
        assert!(list(&(entry("cache", 2) + &entry("cache-2", 1))).is_ok());
        let err = list(&entry("replica-a", 1)).unwrap_err();
        assert!(err.to_string().contains("named like a replica's"), "{err}");
        let err = list(&entry("replica", 2)).unwrap_err();
        assert!(
            err.to_string().contains("`<lease name>-replica-0`"),
            "{err}"
        );
    }

    #[test]
    fn outbound_hosts_parse_and_bad_entries_name_themselves() {
        let list = GuestList::parse(
            "guests:\n  - name: x\n    module: {file: a}\n    allowedOutboundHosts: [\"https://registry.example.com\", \"http://127.0.0.1:8089\"]\n",
        )
        .unwrap();
        let outbound = list.guests[0].limits().unwrap().outbound;
        let shown: Vec<String> = outbound.entries().iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            ["https://registry.example.com:443", "http://127.0.0.1:8089"]
        );
        let err = GuestList::parse(
            "guests:\n  - name: x\n    module: {file: a}\n    allowedOutboundHosts: [\"https://*\"]\n",
        )
        .unwrap_err();
        assert!(err.to_string().contains("\"https://*\""), "{err}");
    }

    #[test]
    fn oci_entries_take_their_settings_and_others_refuse_them() {
        let list = GuestList::parse(
            "guests:\n  - name: x\n    module: {oci: \"127.0.0.1:5000/ops/x:v1\"}\n    ociPollInterval: 5s\n    pullSecret: regcred\n    insecure: true\n",
        )
        .unwrap();
        assert_eq!(
            list.guests[0].oci().unwrap(),
            Some(OciEntry {
                reference: "127.0.0.1:5000/ops/x:v1".into(),
                insecure: true,
                pull_secret: Some("regcred".into()),
                poll_interval: Duration::from_secs(5),
            })
        );
        let defaults =
            GuestList::parse("guests:\n  - name: x\n    module: {oci: \"r.io/x:v1\"}\n").unwrap();
        let oci = defaults.guests[0].oci().unwrap().unwrap();
        assert_eq!(
            (oci.insecure, oci.poll_interval),
            (false, Duration::from_secs(60))
        );
        for (yaml, why) in [
            (
                "module: {file: a}\n    insecure: true",
                "apply to an oci module only",
            ),
            (
                "module: {configMap: {name: m, key: k}}\n    pullSecret: s",
                "apply to an oci module only",
            ),
            (
                "module: {oci: \"r.io/x:v1\"}\n    ociPollInterval: 500ms",
                "at least 1s",
            ),
            ("module: {oci: \"x:v1\"}", "must start with its registry"),
            (
                "module: {oci: \"r.io/x:v1\"}\n    pullSecret: Not_A_Name",
                "not a Secret name",
            ),
        ] {
            let err = GuestList::parse(&format!("guests:\n  - name: x\n    {yaml}\n")).unwrap_err();
            assert!(err.to_string().contains(why), "{yaml}: {err}");
        }
    }

    #[test]
    fn verify_takes_keys_and_a_bundle_where_the_source_needs_one() {
        let (_, pem) = crate::source::signature::tests::key();
        let keys = serde_json::to_string(&[&pem]).unwrap();
        let parse = |module: &str, verify: &str| {
            GuestList::parse(&format!(
                "guests:\n  - name: x\n    module: {module}\n    verify: {verify}\n"
            ))
        };
        let list = parse(
            "{file: /m.wasm}",
            &format!("{{keys: {keys}, bundle: {{configMap: {{name: b, key: m.bundle}}}}}}"),
        )
        .unwrap();
        let verify = list.guests[0].verify.as_ref().unwrap();
        assert_eq!(
            verify.bundle,
            Some(ModuleSource::ConfigMap {
                name: "b".into(),
                key: "m.bundle".into()
            })
        );
        assert!(parse("{oci: \"r.io/x:v1\"}", &format!("{{keys: {keys}}}")).is_ok());
        for (module, verify, why) in [
            (
                "{file: /m.wasm}",
                format!("{{keys: {keys}}}"),
                "verify.bundle is required",
            ),
            (
                "{oci: \"r.io/x:v1\"}",
                format!("{{keys: {keys}, bundle: {{file: /b}}}}"),
                "found beside it",
            ),
            (
                "{file: /m.wasm}",
                "{keys: [\"nope\"], bundle: {file: /b}}".into(),
                "verify.keys: key 1",
            ),
            (
                "{file: /m.wasm}",
                format!("{{keys: {keys}, bundle: {{url: ftp://x}}}}"),
                "http or https",
            ),
            ("{file: /m.wasm}", "{keyz: []}".into(), "unknown field"),
        ] {
            let err = parse(module, &verify).unwrap_err();
            assert!(err.to_string().contains(why), "{verify}: {err}");
        }
    }

    #[test]
    fn sizes_use_binary_suffixes() {
        assert_eq!(parse_bytes("64Mi"), Ok(64 << 20));
        assert_eq!(parse_bytes("1024"), Ok(1024));
        assert!(parse_bytes("1Pi").is_err());
    }
}
