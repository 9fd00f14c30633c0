//! The `wasmop` command line without a cluster: `render` and `rbac`
//! (interface contracts), with the same sandbox and validation as `run`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn guest(name: &str) -> PathBuf {
    let path = workspace().join(format!("target/guests/{name}.wasm"));
    assert!(
        path.exists(),
        "{} is missing: run `cargo xtask build-guests` (cargo xtask test does)",
        path.display()
    );
    path
}

fn wasmop(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wasmop"))
        .args(args)
        .output()
        .expect("wasmop runs")
}

fn write(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("wasmop-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// `wasmop render --guest <guest> --parent <parent> <extra…>`.
fn render(guest: &Path, parent: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "render",
        "--guest",
        guest.to_str().unwrap(),
        "--parent",
        parent.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    wasmop(&args)
}

/// `wasmop render` of the sample Cache with `-o json`.
fn render_sample_json() -> Output {
    let sample = workspace().join("deploy/samples/cache.yaml");
    let guest = guest("cache-operator");
    render(&guest, &sample, &["-o", "json"])
}

#[test]
fn render_prints_one_json_object_with_the_contract_keys() {
    let out = render_sample_json();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON object on stdout");
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    for key in [
        "children",
        "status",
        "requeueAfterSeconds",
        "finalized",
        "events",
    ] {
        assert!(keys.contains(&key), "missing {key} in {keys:?}");
    }
    let kinds: Vec<&str> = v["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds.len(), 3, "{kinds:?}");
    for kind in ["Deployment", "Service", "ConfigMap"] {
        assert!(kinds.contains(&kind), "{kind} missing from {kinds:?}");
    }
    assert_eq!(v["status"]["phase"], "Pending");
}

#[test]
fn render_takes_observed_children_and_prints_yaml() {
    let sample = workspace().join("deploy/samples/cache.yaml");
    let first = render_sample_json();
    let v: Value = serde_json::from_slice(&first.stdout).unwrap();
    let mut observed = String::new();
    for child in v["children"].as_array().unwrap() {
        let mut child = child.clone();
        if child["kind"] == "Deployment" {
            child["status"] = serde_json::json!({"replicas": 2, "readyReplicas": 2, "updatedReplicas": 2, "availableReplicas": 2, "observedGeneration": 1});
        }
        observed.push_str("---\n");
        observed.push_str(&serde_json::to_string(&child).unwrap());
        observed.push('\n');
    }
    let observed = write("observed.yaml", &observed);
    let out = render(
        &guest("cache-operator"),
        &sample,
        &["--observed", observed.to_str().unwrap()],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("phase: Ready"), "{text}");
}

#[test]
fn render_of_an_endless_guest_fails_within_about_the_deadline() {
    let parent = write(
        "loop.yaml",
        "apiVersion: test.wasmop.dev/v1alpha1\nkind: Hostile\nmetadata: {name: spin, namespace: default}\nspec: {attack: loop}\n",
    );
    let started = Instant::now();
    let out = render(&guest("hostile"), &parent, &["--timeout", "500ms"]);
    let elapsed = started.elapsed();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("deadline exceeded"), "{err}");
    // Compilation happens first; the call itself is cut at the deadline.
    assert!(elapsed < Duration::from_secs(30), "took {elapsed:?}");
}

#[test]
fn render_applies_the_same_validation_as_the_host() {
    for (attack, needle) in [
        ("other-namespace", "namespace"),
        ("undeclared-kind", "undeclared kind"),
        ("spoofed-owner", "ownerReferences"),
        ("panic", "panic"),
    ] {
        let parent = write(
            &format!("{attack}.yaml"),
            &format!(
                "apiVersion: test.wasmop.dev/v1alpha1\nkind: Hostile\nmetadata: {{name: h, namespace: default}}\nspec: {{attack: {attack}}}\n"
            ),
        );
        let out = render(&guest("hostile"), &parent, &[]);
        assert!(!out.status.success(), "{attack} rendered");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{attack}: {err}");
    }
}

#[test]
fn rbac_output_matches_the_committed_roles() {
    let out = wasmop(&[
        "rbac",
        "--guest-identity",
        "impersonate",
        "--guest",
        &format!("cache-operator={}", guest("cache-operator").display()),
        "--guest",
        &format!("cache-operator={}", guest("cache-operator-v2").display()),
        "--webhook-cert-secret",
        "wasmop-webhook-tls",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let generated = String::from_utf8(out.stdout).unwrap();
    let committed = std::fs::read_to_string(workspace().join("deploy/rbac/roles.yaml")).unwrap();
    // The file is the command's output below a header of comment lines.
    let committed: String = committed
        .lines()
        .skip_while(|l| l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(
        committed, generated,
        "deploy/rbac/roles.yaml is stale: regenerate it with the command in its header"
    );
}

#[test]
fn a_file_that_is_not_a_component_is_refused_with_a_clear_error() {
    let bogus = write("bogus.wasm", "not wasm");
    let sample = workspace().join("deploy/samples/cache.yaml");
    let out = render(&bogus, &sample, &[]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a valid WebAssembly component"));
}

#[test]
fn errors_are_one_clear_line_each() {
    // Not wasm: one line, not the parser's byte dump.
    let bogus = write("not-wasm.bin", "not wasm at all");
    let sample = workspace().join("deploy/samples/cache.yaml");
    let out = render(&bogus, &sample, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.starts_with("error: "), "{err}");
    // No cluster to talk to: the cause once.
    let home = std::env::temp_dir().join(format!("wasmop-cli-home-{}", std::process::id()));
    std::fs::create_dir_all(&home).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_wasmop"))
        .args([
            "run",
            "--guest",
            &format!("cache-operator={}", guest("cache-operator").display()),
        ])
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env("HOME", &home)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    let line = err
        .lines()
        .find(|l| l.starts_with("error: "))
        .expect("an error line");
    assert_eq!(
        line.matches("No such file or directory").count(),
        1,
        "{line}"
    );
    assert!(line.contains("no cluster to talk to"), "{line}");
}

#[test]
fn run_checks_local_inputs_before_it_contacts_a_cluster() {
    // No kubeconfig anywhere: a missing module file is what it reports.
    let home = std::env::temp_dir().join(format!("wasmop-cli-home2-{}", std::process::id()));
    std::fs::create_dir_all(&home).unwrap();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_wasmop"))
            .arg("run")
            .args(args)
            .env_remove("KUBECONFIG")
            .env("HOME", &home)
            .output()
            .unwrap()
    };
    let out = run(&["--guest", "x=/does/not/exist.wasm"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("/does/not/exist.wasm") && !err.contains("kubeconfig"),
        "{err}"
    );
    // Guest names are DNS labels, as in the guest list.
    let module = guest("cache-operator");
    let out = run(&["--guest", &format!("Bad_Name={}", module.display())]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is not a DNS label"), "{err}");
    let out = run(&[
        "--guest",
        &format!("x={}", module.display()),
        "--settings",
        "y=/tmp/s.yaml",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no --guest is named \"y\""), "{err}");
    // Signed modules: a --guest file carries no signature, and the trusted
    // keys must be public keys.
    let out = run(&[
        "--require-signed-modules",
        "--guest",
        &format!("x={}", module.display()),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--require-signed-modules refuses --guest"),
        "{err}"
    );
    let not_keys = write(
        "not-keys.pem",
        "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
    );
    let out = run(&["--trusted-keys", not_keys.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--trusted-keys")
            && err.contains("expected a PUBLIC KEY")
            && !err.contains("kubeconfig"),
        "{err}"
    );
}

#[test]
fn render_hands_the_settings_to_the_guest_and_reports_refused_ones() {
    let parent = write(
        "settings-parent.yaml",
        "apiVersion: test.wasmop.dev/v1alpha1\nkind: Hostile\nmetadata: {name: h, namespace: default}\nspec: {attack: none}\n",
    );
    let good = write("good-settings.yaml", "describe: null\n");
    let out = render(
        &guest("hostile"),
        &parent,
        &["--settings", good.to_str().unwrap(), "-o", "json"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let refused = write("refused-settings.yaml", "describe: refuse-settings\n");
    let out = render(
        &guest("hostile"),
        &parent,
        &["--settings", refused.to_str().unwrap()],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("refused its settings"),
        "{err}"
    );
    // The guest list's 64 KiB bound holds here too.
    let huge = write(
        "huge-settings.yaml",
        &format!("blob: {}\n", "x".repeat(64 << 10)),
    );
    let out = render(
        &guest("hostile"),
        &parent,
        &["--settings", huge.to_str().unwrap()],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("at most 65536 are allowed"),
        "{err}"
    );
}

#[test]
fn render_takes_related_objects_and_conceals_secret_values_unless_asked() {
    let parent = write(
        "auth-parent.yaml",
        "apiVersion: apps.example.com/v1alpha1\nkind: Cache\nmetadata: {name: a, namespace: default}\nspec:\n  image: redis:7.2\n  auth: {secretRef: {name: creds, key: password}}\n",
    );
    let missing = render(&guest("cache-operator"), &parent, &["-o", "json"]);
    assert!(
        missing.status.success(),
        "{}",
        String::from_utf8_lossy(&missing.stderr)
    );
    let v: Value = serde_json::from_slice(&missing.stdout).unwrap();
    assert_eq!(
        v["children"],
        serde_json::json!([]),
        "children without their Secret"
    );
    assert_eq!(v["status"]["conditions"][0]["reason"], "SecretMissing");

    // "czNjcjN0" is base64 of "s3cr3t".
    let related = write(
        "auth-related.yaml",
        "apiVersion: v1\nkind: Secret\nmetadata: {name: creds, namespace: default}\ndata: {password: czNjcjN0}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: other, namespace: default}\ndata: {password: b3RoZXI=}\n",
    );
    let hash = |extra: &[&str]| {
        let mut args = vec!["--related", related.to_str().unwrap(), "-o", "json"];
        args.extend_from_slice(extra);
        let out = render(&guest("cache-operator"), &parent, &args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        let deployment = v["children"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["kind"] == "Deployment")
            .cloned()
            .expect("a Deployment once the Secret is there");
        assert_eq!(
            deployment["spec"]["template"]["spec"]["containers"][0]["env"][0]["valueFrom"]["secretKeyRef"]
                ["name"],
            "creds"
        );
        deployment["spec"]["template"]["metadata"]["annotations"]["apps.example.com/secret-hash"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    // The guest hashes what it receives: the value's digest by default,
    // the value itself with --secret-values.
    assert_ne!(hash(&[]), hash(&["--secret-values"]));

    // The hostile guest echoes its related objects into its status: the
    // printed status holds the digest, never the value.
    let hostile = write(
        "echo-parent.yaml",
        "apiVersion: test.wasmop.dev/v1alpha1\nkind: Hostile\nmetadata: {name: h, namespace: default}\nspec: {attack: echo-related, target: creds}\n",
    );
    let settings = write("echo-settings.yaml", "related: true\n");
    let echo = |extra: &[&str]| {
        let mut args = vec![
            "--related",
            related.to_str().unwrap(),
            "--settings",
            settings.to_str().unwrap(),
            "-o",
            "json",
        ];
        args.extend_from_slice(extra);
        let out = render(&guest("hostile"), &hostile, &args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let hidden = echo(&[]);
    assert!(
        !hidden.contains("czNjcjN0") && hidden.contains("password"),
        "{hidden}"
    );
    let v: Value = serde_json::from_str(&hidden).unwrap();
    assert_eq!(
        v["status"]["related"].as_array().unwrap().len(),
        1,
        "only the Secret the parent names is related: {hidden}"
    );
    assert!(echo(&["--secret-values"]).contains("czNjcjN0"));
}

#[test]
fn render_keeps_the_compiled_module_in_its_cache_dir_and_loads_it_from_there() {
    let cache = std::env::temp_dir().join(format!("wasmop-cli-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache);
    let sample = workspace().join("deploy/samples/cache.yaml");
    let dir = cache.to_str().unwrap();
    let mut outputs = Vec::new();
    for _ in 0..2 {
        let out = Command::new(env!("CARGO_BIN_EXE_wasmop"))
            .env("WASMOP_LOG", "wasmop_host=debug")
            .args(["render", "-o", "json", "--cache-dir", dir, "--guest"])
            .arg(guest("cache-operator-ts"))
            .arg("--parent")
            .arg(&sample)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let rendered: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(rendered["children"].as_array().map(Vec::len), Some(3));
        outputs.push(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    assert!(
        outputs[0].contains("hit=Miss"),
        "the first render compiles: {}",
        outputs[0]
    );
    assert!(
        outputs[1].contains("hit=Disk"),
        "the second loads the compiled module from the cache: {}",
        outputs[1]
    );
    assert!(std::fs::read_dir(&cache).unwrap().next().is_some());
    std::fs::remove_dir_all(&cache).unwrap();
}

/// An `admission.k8s.io/v1` AdmissionReview creating `object`.
fn admission_review(object: &Value) -> PathBuf {
    let review = serde_json::json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "b6a1", "operation": "CREATE", "userInfo": {"username": "alice"},
            "kind": {"group": "apps.example.com", "version": "v1alpha1", "kind": "Cache"},
            "resource": {"group": "apps.example.com", "version": "v1alpha1", "resource": "caches"},
            "object": object, "dryRun": false,
        },
    });
    let name = format!(
        "review-{}.json",
        object["metadata"]["name"].as_str().unwrap()
    );
    write(&name, &review.to_string())
}

fn cache_object(name: &str, spec: Value) -> Value {
    serde_json::json!({"apiVersion": "apps.example.com/v1alpha1", "kind": "Cache",
        "metadata": {"name": name, "namespace": "default"}, "spec": spec})
}

fn render_json(guest_name: &str, args: &[&str]) -> Result<Value, String> {
    let guest = guest(guest_name);
    let mut all = vec!["render", "--guest", guest.to_str().unwrap(), "-o", "json"];
    all.extend_from_slice(args);
    let out = wasmop(&all);
    if out.status.success() {
        Ok(serde_json::from_slice(&out.stdout).expect("JSON on stdout"))
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[test]
fn render_admission_defaults_then_validates_as_the_two_webhooks_would() {
    let review = admission_review(&cache_object(
        "plain",
        serde_json::json!({"image": "redis:7.2"}),
    ));
    let out = render_json("cache-operator", &["--admission", review.to_str().unwrap()]).unwrap();
    assert_eq!(out["mutating"]["allowed"], true);
    assert_eq!(
        out["mutating"]["patch"],
        serde_json::json!([{"op": "add", "path": "/spec/config", "value": {"maxmemory-policy": "allkeys-lru"}}])
    );
    assert_eq!(
        out["object"]["spec"]["config"]["maxmemory-policy"],
        "allkeys-lru"
    );
    assert_eq!(out["validating"]["allowed"], true);
    assert!(out["validating"].get("patch").is_none());

    // A denial is a verdict, printed with the guest's message and code.
    let review = admission_review(&cache_object(
        "untagged",
        serde_json::json!({"image": "redis"}),
    ));
    let out = render_json("cache-operator", &["--admission", review.to_str().unwrap()]).unwrap();
    assert_eq!(out["mutating"]["allowed"], false);
    assert_eq!(out["mutating"]["code"], 403);
    assert!(
        out["mutating"]["message"]
            .as_str()
            .unwrap()
            .contains("has no tag")
    );
    assert!(out.get("validating").is_none());

    // A module without admit says so.
    let err =
        render_json("tutorial-cache", &["--admission", review.to_str().unwrap()]).unwrap_err();
    assert!(
        err.contains("does not export wasmop:operator/admission"),
        "{err}"
    );
}

#[test]
fn render_convert_round_trips_the_sample_byte_for_byte() {
    let sample = workspace().join("deploy/samples/cache.yaml");
    let beta = render_json(
        "cache-operator",
        &[
            "--convert",
            sample.to_str().unwrap(),
            "--to",
            "apps.example.com/v1beta1",
        ],
    )
    .unwrap();
    assert_eq!(beta[0]["apiVersion"], "apps.example.com/v1beta1");
    assert_eq!(
        beta[0]["spec"]["ports"],
        serde_json::json!({"client": 6379})
    );
    assert_eq!(beta[0]["spec"]["config"][0]["name"], "redis.conf");
    let beta_file = write("sample-v1beta1.json", &beta[0].to_string());
    let alpha = render_json(
        "cache-operator",
        &[
            "--convert",
            beta_file.to_str().unwrap(),
            "--to",
            "apps.example.com/v1alpha1",
        ],
    )
    .unwrap();
    let original: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(&sample).unwrap()).unwrap();
    assert_eq!(alpha[0].to_string(), original.to_string());
}

#[test]
fn render_refuses_hostile_verdicts_and_conversions_naming_the_rule() {
    let hostile = |attack: &str| {
        serde_json::json!({"apiVersion": "test.wasmop.dev/v1alpha1", "kind": "Hostile",
            "metadata": {"name": attack, "namespace": "default", "uid": "u-1"}, "spec": {"attack": attack}})
    };
    for (attack, says) in [
        ("convert-rename", "changed metadata.name"),
        ("convert-drop", "answered 0 objects for 1"),
        ("convert-stale", "has apiVersion"),
        ("convert-host-label", "under wasmop.dev/"),
        ("convert-host-condition", "GuestReconciled"),
        ("convert-finalizer", "changed metadata.finalizers"),
        ("convert-owner", "changed metadata.ownerReferences"),
        ("convert-loop", "deadline exceeded"),
    ] {
        let file = write(&format!("{attack}.json"), &hostile(attack).to_string());
        let err = render_json(
            "hostile",
            &[
                "--convert",
                file.to_str().unwrap(),
                "--to",
                "test.wasmop.dev/v1beta1",
                "--timeout",
                "500ms",
            ],
        )
        .unwrap_err();
        assert!(err.contains(says), "{attack}: {err}");
    }
    for (attack, says) in [
        ("admit-rename", "metadata.name"),
        ("admit-owner", "metadata.ownerReferences"),
        ("admit-bad-code", "not an HTTP error status"),
        ("admit-loop", "deadline exceeded"),
    ] {
        let mut review: Value = serde_json::from_str(
            &std::fs::read_to_string(admission_review(&hostile(attack))).unwrap(),
        )
        .unwrap();
        review["request"]["kind"] = serde_json::json!({"group": "test.wasmop.dev", "version": "v1alpha1", "kind": "Hostile"});
        let file = write(&format!("{attack}-review.json"), &review.to_string());
        let err = render_json(
            "hostile",
            &["--admission", file.to_str().unwrap(), "--timeout", "500ms"],
        )
        .unwrap_err();
        assert!(err.contains(says), "{attack}: {err}");
    }
}

#[test]
fn rbac_refuses_a_certificate_secret_that_is_not_a_secret_name() {
    let out = wasmop(&[
        "rbac",
        "--guest",
        guest("cache-operator").to_str().unwrap(),
        "--webhook-cert-secret",
        "wasmop-system/wasmop-webhook-tls",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--webhook-cert-secret") && err.contains("not a Secret name"),
        "{err}"
    );
}
