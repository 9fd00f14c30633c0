//! Signed modules on the real control plane, a real OCI registry and the
//! real cosign (built from `tests/cosign`): modules cosign signed run under
//! `--require-signed-modules`, what `wasmop push --sign-key` signs `cosign
//! verify` accepts, and every signature that does not hold (the hostile
//! cases of `guests/hostile/signatures`) is refused with
//! `SignatureInvalid` while the running version keeps running.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, ensure};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::Api;
use wasmop_testenv::harness::Test;
use wasmop_testenv::{Registry, TestEnv};

use super::oci::{flavor_of, push};
use crate::support::guests::{Entry, GuestList};
use crate::support::{
    HostProcess, admin_identity, create_small_cache, guest_module, install_cache_crd,
    put_guest_list, put_module, wait_for, wait_for_event, wait_ready,
};

const LONG: Duration = Duration::from_secs(120);
const LIST: &str = "wasmop-guests";
/// The password of the test keys, as cosign reads it.
const PASSWORD: &str = "wasmop-test-password";

/// cosign, and two key pairs it made, `trusted` and `untrusted`, in a
/// directory of their own (also cosign's `$HOME`, so its TUF cache stays
/// there).
struct Cosign {
    bin: PathBuf,
    dir: PathBuf,
}

impl Cosign {
    fn new(env: &TestEnv, label: &str) -> anyhow::Result<Self> {
        let dir = env.temp_dir().join(format!("cosign-{label}"));
        std::fs::create_dir_all(&dir)?;
        let cosign = Self {
            bin: wasmop_testenv::ensure_cosign()?,
            dir,
        };
        for key in ["trusted", "untrusted"] {
            cosign.run(&["generate-key-pair", "--output-key-prefix", key])?;
        }
        // Signing with a key and no transparency log or timestamp
        // authority: a signing config that names none.
        cosign.run(&["signing-config", "create", "--out", "signing-config.json"])?;
        Ok(cosign)
    }

    fn run(&self, args: &[&str]) -> anyhow::Result<String> {
        let out = Command::new(&self.bin)
            .args(args)
            .current_dir(&self.dir)
            .env("COSIGN_PASSWORD", PASSWORD)
            .env("HOME", &self.dir)
            .stdin(Stdio::null())
            .output()
            .context("starting cosign")?;
        crate::support::tool_output("cosign", args, &out)
    }

    fn key(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.key"))
    }

    fn public_file(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.pub"))
    }

    fn public(&self, name: &str) -> anyhow::Result<String> {
        Ok(std::fs::read_to_string(self.public_file(name))?)
    }

    /// `cosign sign` of `image` (by digest) with the key `name`, as cosign
    /// 3 signs by default: a Sigstore bundle attached as a referrer.
    fn sign(&self, name: &str, image: &str) -> anyhow::Result<()> {
        let key = format!("{name}.key");
        self.run(&[
            "sign",
            "--key",
            &key,
            "--signing-config",
            "signing-config.json",
            "--yes",
            "--allow-http-registry",
            "--allow-insecure-registry",
            image,
        ])
        .map(drop)
    }

    /// `cosign sign --new-bundle-format=false`: the `sha256-<hex>.sig` tag
    /// cosign 2 writes.
    fn sign_legacy(&self, name: &str, image: &str) -> anyhow::Result<()> {
        let key = format!("{name}.key");
        self.run(&[
            "sign",
            "--key",
            &key,
            "--use-signing-config=false",
            "--tlog-upload=false",
            "--new-bundle-format=false",
            "--yes",
            "--allow-http-registry",
            "--allow-insecure-registry",
            image,
        ])
        .map(drop)
    }

    /// `cosign sign-blob --bundle` of `file` with the key `name`: the bundle
    /// file, in the Sigstore bundle format (cosign 3's default) or, with
    /// `legacy`, in cosign's own.
    fn sign_blob(&self, name: &str, file: &Path, legacy: bool) -> anyhow::Result<PathBuf> {
        let bundle = file.with_extension(format!(
            "{name}{}.bundle",
            if legacy { ".legacy" } else { "" }
        ));
        let key = format!("{name}.key");
        let (file, out) = (path_str(file)?, path_str(&bundle)?);
        let mut args = vec!["sign-blob", "--key", &key, "--bundle", out, "--yes"];
        if legacy {
            args.extend([
                "--use-signing-config=false",
                "--tlog-upload=false",
                "--new-bundle-format=false",
            ]);
        } else {
            args.extend(["--signing-config", "signing-config.json"]);
        }
        args.push(file);
        self.run(&args)?;
        Ok(bundle)
    }

    /// `cosign verify --key <name>.pub` of `image`, offline.
    fn verify(&self, name: &str, image: &str) -> anyhow::Result<String> {
        let key = format!("{name}.pub");
        self.run(&[
            "verify",
            "--key",
            &key,
            "--insecure-ignore-tlog",
            "--allow-http-registry",
            "--allow-insecure-registry",
            image,
        ])
    }
}

fn path_str(path: &Path) -> anyhow::Result<&str> {
    path.to_str().context("a UTF-8 path")
}

/// `wasmop push --insecure --sign-key <key>` of `module` to `reference`:
/// what it printed.
fn push_signed(module: &Path, reference: &str, key: &Path) -> anyhow::Result<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_wasmop"))
        .args(["push", "--insecure", "--sign-key"])
        .arg(key)
        .arg(module)
        .arg(reference)
        .env("COSIGN_PASSWORD", PASSWORD)
        .stdin(Stdio::null())
        .output()?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    ensure!(
        out.status.success(),
        "wasmop push --sign-key failed: {}{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(stdout)
}

/// The cache-operator from `module` (an `oci` reference over plain HTTP,
/// polled every 2 s), watching `ns`.
fn oci_entry(reference: &str, ns: &str) -> Entry {
    Entry::oci("cache-operator", reference)
        .with("insecure", true)
        .with("ociPollInterval", "2s")
        .namespaces([ns])
}

/// A namespace with `entry`'s guest list and a host following it with
/// `flags`; the host's kubeconfig.
async fn setup(
    env: &TestEnv,
    prefix: &str,
    entry: impl Fn(&str) -> Entry,
    flags: &[&str],
) -> anyhow::Result<(Client, String, HostProcess, PathBuf)> {
    let client = env.client();
    install_cache_crd(&client).await?;
    let ns = env.create_namespace(prefix).await?;
    list_only(&client, &ns, entry(&ns)).await?;
    let (_, kubeconfig) = admin_identity(env, &format!("wasmop-{ns}")).await?;
    let list = format!("{ns}/{LIST}");
    let mut args = vec!["--guests-configmap", &list];
    args.extend(flags);
    let host = HostProcess::start(env, &kubeconfig, &ns, &args)?;
    Ok((client, ns, host, kubeconfig))
}

/// The guest list of `ns` with `entry` alone.
async fn list_only(client: &Client, ns: &str, entry: Entry) -> anyhow::Result<()> {
    put_guest_list(client, ns, LIST, &GuestList::of([entry]).yaml()).await
}

/// A new Cache `name` becomes Ready, reconciled by the version `flavor`
/// (`v1`, or `v2` for cache-operator-v2).
async fn served_by(client: &Client, ns: &str, name: &str, flavor: &str) -> anyhow::Result<()> {
    create_small_cache(client, ns, name).await?;
    wait_ready(client, ns, name).await?;
    let now = flavor_of(client, ns, name).await?;
    ensure!(
        now == flavor,
        "Cache {name} was reconciled by {now}, not {flavor}"
    );
    Ok(())
}

/// `wasmop status` of the list, as text.
fn status(kubeconfig: &Path, ns: &str) -> anyhow::Result<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_wasmop"))
        .arg("status")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--guests-configmap", &format!("{ns}/{LIST}")])
        .stdin(Stdio::null())
        .output()?;
    ensure!(
        out.status.success(),
        "wasmop status failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

async fn oci_modules_run_only_with_a_trusted_signature_and_cosign_accepts_what_wasmop_push_signs(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let registry = Registry::start(None).await?;
    let cosign = Cosign::new(&env, "oci")?;
    let repository = format!("{}/ops/cache-operator", registry.address());
    let tag = format!("{repository}:stable");
    let v1 = push(&guest_module("cache-operator")?, &tag, None)?;
    cosign.sign("trusted", &format!("{repository}@{v1}"))?;
    let trusted = cosign.public_file("trusted");
    let (client, ns, mut host, kubeconfig) = setup(
        &env,
        "signed-oci",
        |ns| oci_entry(&tag, ns),
        &[
            "--require-signed-modules",
            "--trusted-keys",
            path_str(&trusted)?,
        ],
    )
    .await?;
    host.wait_for_log("started guest", LONG).await?;
    served_by(&client, &ns, "a", "v1").await?;

    // v2, unsigned, on the tag: refused at the next poll.
    let v2 = push(&guest_module("cache-operator-v2")?, &tag, None)?;
    let note = wait_for_event(&client, &ns, LIST, "SignatureInvalid", LONG).await?;
    ensure!(
        note.contains("cache-operator")
            && note.contains("no signature")
            && note.contains(&v2[7..19]),
        "{note}"
    );
    served_by(&client, &ns, "b", "v1").await?;
    let shown = wait_for(LONG, || async {
        let text = status(&kubeconfig, &ns)?;
        Ok((text.contains("REFUSED") && text.contains("SignatureInvalid")).then_some(text))
    })
    .await
    .context("wasmop status did not show the refused module")?;
    ensure!(shown.contains("cache-operator"), "{shown}");

    // The tag moved back to v1: nothing changes, and the refusal is over.
    push(&guest_module("cache-operator")?, &tag, None)?;
    wait_for_event(&client, &ns, LIST, "GuestRestored", LONG).await?;
    let status_now = status(&kubeconfig, &ns)?;
    ensure!(
        !status_now.contains("REFUSED"),
        "the refusal is still shown: {status_now}"
    );

    // v2 again, signed by a key the host does not trust.
    push(&guest_module("cache-operator-v2")?, &tag, None)?;
    cosign.sign("untrusted", &format!("{repository}@{v2}"))?;
    host.wait_for_log("not signed by a trusted key", LONG)
        .await?;
    served_by(&client, &ns, "c", "v1").await?;

    // v2 pushed and signed by `wasmop push --sign-key` with the trusted
    // key: the host swaps to it, and cosign accepts the signature.
    let printed = push_signed(
        &guest_module("cache-operator-v2")?,
        &tag,
        &cosign.key("trusted"),
    )?;
    ensure!(
        printed.contains(&format!("signed {repository}@{v2} as sha256:")),
        "{printed}"
    );
    wait_for_event(&client, &ns, LIST, "GuestSwapped", LONG).await?;
    served_by(&client, &ns, "d", "v2").await?;
    let verified = cosign.verify("trusted", &format!("{repository}@{v2}"))?;
    ensure!(verified.contains(&v2), "{verified}");
    let status = status(&kubeconfig, &ns)?;
    ensure!(
        !status.contains("REFUSED"),
        "the swap left a refusal shown: {status}"
    );
    ensure!(host.is_running());
    Ok(())
}

/// Guest lists whose module the host must refuse, each followed by a new
/// Cache that the running version, `flavor`, must still serve.
struct Refusals<'a> {
    client: &'a Client,
    ns: &'a str,
    flavor: &'static str,
    kept: usize,
}

impl<'a> Refusals<'a> {
    fn new(client: &'a Client, ns: &'a str, flavor: &'static str) -> Self {
        Self {
            client,
            ns,
            flavor,
            kept: 0,
        }
    }

    /// Lists `entry` alone: the host logs `why`, and `flavor` serves on.
    async fn refused(
        &mut self,
        host: &mut HostProcess,
        entry: Entry,
        why: &str,
    ) -> anyhow::Result<()> {
        list_only(self.client, self.ns, entry).await?;
        host.wait_for_log(why, LONG)
            .await
            .with_context(|| format!("not refused with {why:?}"))?;
        self.kept += 1;
        let cache = format!("kept-{}-{}", self.flavor, self.kept);
        served_by(self.client, self.ns, &cache, self.flavor).await
    }
}

/// The module of `flavor` written to `dir` as a file.
fn module_file(dir: &Path, flavor: &str) -> anyhow::Result<PathBuf> {
    let name = if flavor == "v1" {
        "cache-operator"
    } else {
        "cache-operator-v2"
    };
    let path = dir.join(format!("{flavor}.wasm"));
    std::fs::copy(guest_module(name)?, &path)?;
    Ok(path)
}

async fn hostile_signatures_are_refused_and_the_running_version_keeps_running(
    env: Arc<TestEnv>,
) -> anyhow::Result<()> {
    let registry = Registry::start(None).await?;
    let cosign = Cosign::new(&env, "hostile")?;
    let trusted = cosign.public("trusted")?;
    let verify = serde_json::json!({"keys": [trusted]});
    let at = |repo: &str, digest: &str| format!("{}/ops/{repo}@{digest}", registry.address());
    let v1 = push(
        &guest_module("cache-operator")?,
        &format!("{}/ops/good:v1", registry.address()),
        None,
    )?;
    cosign.sign("trusted", &at("good", &v1))?;
    let good = at("good", &v1);
    let (client, ns, mut host, _) = setup(
        &env,
        "signed-hostile",
        |ns| oci_entry(&good, ns).with("verify", verify.clone()),
        &[],
    )
    .await?;
    host.wait_for_log("started guest", LONG).await?;
    served_by(&client, &ns, "a", "v1").await?;
    let v2_module = guest_module("cache-operator-v2")?;
    let push_v2 = |repo: &str| {
        push(
            &v2_module,
            &format!("{}/ops/{repo}:v2", registry.address()),
            None,
        )
    };
    let mut v1_runs = Refusals::new(&client, &ns, "v1");

    // A signature for another digest: v1's signature, in v2's repository,
    // listed as v2's (the referrers' tag fallback copied).
    push(
        &guest_module("cache-operator")?,
        &format!("{}/ops/digest:v1", registry.address()),
        None,
    )?;
    cosign.sign("trusted", &at("digest", &v1))?;
    let v2 = push_v2("digest")?;
    let fallback = |digest: &str| {
        format!(
            "{}/ops/digest:{}",
            registry.address(),
            digest.replace(':', "-")
        )
    };
    copy_manifest(&fallback(&v1), &fallback(&v2)).await?;
    v1_runs
        .refused(
            &mut host,
            oci_entry(&at("digest", &v2), &ns).with("verify", verify.clone()),
            &format!("the module's manifest {}", &v2[7..19]),
        )
        .await?;

    // A signature object that points at another repository: a `.sig` made
    // for ops/elsewhere, copied beside the same digest in ops/moved.
    push_v2("elsewhere")?;
    push_v2("moved")?;
    cosign.sign_legacy("trusted", &at("elsewhere", &v2))?;
    cosign.run(&[
        "copy",
        "--only=sig",
        "--allow-http-registry",
        "--allow-insecure-registry",
        &at("elsewhere", &v2),
        &format!("{}/ops/moved", registry.address()),
    ])?;
    v1_runs
        .refused(
            &mut host,
            oci_entry(&at("moved", &v2), &ns).with("verify", verify.clone()),
            "names the repository",
        )
        .await?;

    // A signature by an untrusted key.
    push_v2("untrusted")?;
    cosign.sign("untrusted", &at("untrusted", &v2))?;
    v1_runs
        .refused(
            &mut host,
            oci_entry(&at("untrusted", &v2), &ns).with("verify", verify.clone()),
            "the attached bundle is signed by none of the keys",
        )
        .await?;

    // Files with `cosign sign-blob` bundles: cosign's own format is
    // accepted too (v2 runs), then each hostile bundle keeps v2 running.
    let dir = cosign.dir.clone();
    let (m1, m2) = (module_file(&dir, "v1")?, module_file(&dir, "v2")?);
    let file_entry = |module: &Path, bundle: &Path| -> anyhow::Result<Entry> {
        Ok(Entry::file("cache-operator", path_str(module)?)
            .namespaces([&ns])
            .with(
                "verify",
                serde_json::json!({"keys": [trusted], "bundle": {"file": path_str(bundle)?}}),
            ))
    };
    let legacy = cosign.sign_blob("trusted", &m2, true)?;
    list_only(&client, &ns, file_entry(&m2, &legacy)?).await?;
    wait_for_event(&client, &ns, LIST, "GuestSwapped", LONG).await?;
    served_by(&client, &ns, "file-v2", "v2").await?;
    let mut v2_runs = Refusals::new(&client, &ns, "v2");
    // v2's bundle given for v1.
    let v2_bundle = cosign.sign_blob("trusted", &m2, false)?;
    v2_runs
        .refused(
            &mut host,
            file_entry(&m1, &v2_bundle)?,
            "digest mismatch: the bundle signs sha256",
        )
        .await?;
    // A bundle by an untrusted key.
    let untrusted = cosign.sign_blob("untrusted", &m1, false)?;
    v2_runs
        .refused(
            &mut host,
            file_entry(&m1, &untrusted)?,
            "the module is signed by none of the keys",
        )
        .await?;
    // A truncated bundle.
    let good_bundle = std::fs::read(cosign.sign_blob("trusted", &m1, false)?)?;
    let truncated = dir.join("truncated.bundle");
    std::fs::write(&truncated, &good_bundle[..good_bundle.len() / 2])?;
    v2_runs
        .refused(
            &mut host,
            file_entry(&m1, &truncated)?,
            "unreadable signature: not a bundle",
        )
        .await?;
    // A 100 MiB bundle (sparse: the host must refuse it by its size).
    let huge = dir.join("huge.bundle");
    std::fs::File::create(&huge)?.set_len(100 << 20)?;
    v2_runs
        .refused(
            &mut host,
            file_entry(&m1, &huge)?,
            "the bundle is 104857600 bytes, larger than the 256 KiB",
        )
        .await?;

    // The module and its bundle in ConfigMaps, as `module` names them.
    put_module(
        &client,
        &ns,
        "signed-module",
        "module.wasm",
        &std::fs::read(&m1)?,
    )
    .await?;
    let bundle_cm: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "signed-bundle", "namespace": ns},
        "data": {"module.wasm.bundle": String::from_utf8(good_bundle)?},
    }))?;
    Api::<ConfigMap>::namespaced(client.clone(), &ns)
        .create(&Default::default(), &bundle_cm)
        .await?;
    let entry = Entry::config_map("cache-operator", "signed-module")
        .namespaces([&ns])
        .with(
            "verify",
            serde_json::json!({"keys": [trusted], "bundle": {"configMap": {"name": "signed-bundle", "key": "module.wasm.bundle"}}}),
        );
    list_only(&client, &ns, entry).await?;
    let module_digest = crate::support::sha256_hex(&std::fs::read(&m1)?);
    host.wait_for_log(&format!("to={}", &module_digest[..12]), LONG)
        .await
        .context("the configMap module with its configMap bundle was not loaded")?;
    served_by(&client, &ns, "configmap-v1", "v1").await?;

    // A module and its bundle at URLs (the registry's blob URLs): a bundle
    // past 256 KiB is refused as it downloads, then the bundle swaps in v2.
    let v2_bytes = std::fs::read(&m2)?;
    let v2_url = put_blob(&registry, v2_bytes.clone()).await?;
    let v2_digest = crate::support::sha256_hex(&v2_bytes);
    let url_entry = |bundle: &str| {
        Entry::url("cache-operator", &v2_url, &v2_digest)
            .namespaces([&ns])
            .with(
                "verify",
                serde_json::json!({"keys": [trusted], "bundle": {"url": bundle}}),
            )
    };
    let large = put_blob(&registry, vec![b' '; 300 << 10]).await?;
    v1_runs
        .refused(
            &mut host,
            url_entry(&large),
            "the bundle is larger than the 256 KiB",
        )
        .await?;
    let bundle = put_blob(&registry, std::fs::read(&v2_bundle)?).await?;
    list_only(&client, &ns, url_entry(&bundle)).await?;
    host.wait_for_log(&format!("to={}", &v2_digest[..12]), LONG)
        .await
        .context("the url module with its url bundle was not loaded")?;
    served_by(&client, &ns, "url-v2", "v2").await?;
    ensure!(host.is_running());
    Ok(())
}

/// Stores `bytes` as a blob of the registry's `ops/blobs`: the URL it is
/// served at.
async fn put_blob(registry: &Registry, bytes: Vec<u8>) -> anyhow::Result<String> {
    wasmop_host::client::install_crypto_provider();
    let client = oci_client::Client::new(oci_client::client::ClientConfig {
        protocol: oci_client::client::ClientProtocol::Http,
        ..Default::default()
    });
    let digest = format!("sha256:{}", crate::support::sha256_hex(&bytes));
    let reference: oci_client::Reference =
        format!("{}/ops/blobs:any", registry.address()).parse()?;
    client
        .auth(
            &reference,
            &oci_client::secrets::RegistryAuth::Anonymous,
            oci_client::RegistryOperation::Push,
        )
        .await?;
    client.push_blob(&reference, bytes, &digest).await?;
    Ok(format!(
        "http://{}/v2/ops/blobs/blobs/{digest}",
        registry.address()
    ))
}

/// Copies the manifest at `from` to `to` (plain HTTP), as whoever may push
/// to a repository may.
async fn copy_manifest(from: &str, to: &str) -> anyhow::Result<()> {
    wasmop_host::client::install_crypto_provider();
    let client = oci_client::Client::new(oci_client::client::ClientConfig {
        protocol: oci_client::client::ClientProtocol::Http,
        ..Default::default()
    });
    let auth = oci_client::secrets::RegistryAuth::Anonymous;
    let index = "application/vnd.oci.image.index.v1+json";
    let (bytes, _) = client
        .pull_manifest_raw(&from.parse()?, &auth, &[index])
        .await
        .with_context(|| format!("reading {from}"))?;
    client
        .push_manifest_raw(&to.parse()?, bytes, http::HeaderValue::from_static(index))
        .await
        .with_context(|| format!("writing {to}"))?;
    Ok(())
}

/// The tests of this module.
pub fn tests() -> Vec<Test> {
    wasmop_testenv::tests![
        oci_modules_run_only_with_a_trusted_signature_and_cosign_accepts_what_wasmop_push_signs,
        hostile_signatures_are_refused_and_the_running_version_keeps_running,
    ]
    .into_iter()
    .map(|test| test.with_timeout(Duration::from_secs(420)))
    .collect()
}
