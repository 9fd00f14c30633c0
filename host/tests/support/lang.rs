//! The cache-operator in each language it is written in (Rust, TypeScript,
//! Python, Go), run by a `wasmop` host per case: the end-to-end suites whose
//! cases run once per language (`rust::<case>`, `ts::`, `python::`, `go::`).

use std::time::Duration;

use anyhow::{Context as _, bail, ensure};
use kube::Client;
use wasmop_testenv::TestEnv;

use super::{HostProcess, at, caches, guest_module, install_cache_crd, wait_for};

/// The guest name every language's cache-operator runs under.
pub const GUEST: &str = "cache-operator";
/// How long a Cache may take to reach a state the cases wait for.
pub const LONG: Duration = Duration::from_secs(90);

/// The cache-operator in each language it is written in. The cases about
/// the guest's behaviour run once per module, each under the guest name
/// [`GUEST`].
#[derive(Debug, Clone, Copy)]
pub enum Lang {
    Rust,
    TypeScript,
    Python,
    Go,
}

impl Lang {
    /// Every language, in the order the cases run.
    pub const ALL: [Self; 4] = [Self::Rust, Self::TypeScript, Self::Python, Self::Go];

    /// The module under `target/guests`.
    pub fn module(self) -> &'static str {
        match self {
            Self::Rust => "cache-operator",
            Self::TypeScript => "cache-operator-ts",
            Self::Python => "cache-operator-py",
            Self::Go => "cache-operator-go",
        }
    }

    /// What names a case's language: the part of the case names after the
    /// module (`rust::<case>`) and the suffix of their namespaces.
    pub fn suffix(self) -> &'static str {
        match self {
            Self::Rust => "rust",
            Self::TypeScript => "ts",
            Self::Python => "python",
            Self::Go => "go",
        }
    }
}

/// The binary's [`super::shared_module_cache`], with `lang`'s
/// cache-operator in it ([`compiled`]).
pub async fn compiled_modules(env: &TestEnv, lang: Lang) -> anyhow::Result<std::path::PathBuf> {
    compiled(env, lang.module()).await
}

/// The binary's [`super::shared_module_cache`], filled with the guest
/// `stem` (a module of `target/guests`) once for the whole
/// binary, before the first host that runs it starts: a 12–18 MB
/// TypeScript or Python component takes tens of seconds to compile, which
/// every host (and every case at once) would pay again.
pub async fn compiled(env: &TestEnv, stem: &str) -> anyhow::Result<std::path::PathBuf> {
    type Warm = std::sync::Arc<tokio::sync::OnceCell<()>>;
    static WARM: std::sync::Mutex<std::collections::BTreeMap<String, Warm>> =
        std::sync::Mutex::new(std::collections::BTreeMap::new());
    let dir = super::shared_module_cache(env);
    let module = guest_module(stem)?;
    let warm = std::sync::Arc::clone(
        WARM.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(stem.to_owned())
            .or_default(),
    );
    warm.get_or_try_init(|| async {
        let parent = env.temp_dir().join(format!("warm-{stem}.yaml"));
        std::fs::write(
            &parent,
            "{apiVersion: apps.example.com/v1alpha1, kind: Cache, metadata: {name: warm, namespace: default}, spec: {image: redis}}",
        )?;
        let started = std::time::Instant::now();
        let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_wasmop"))
            .arg("render")
            .arg("--guest")
            .arg(&module)
            .arg("--parent")
            .arg(&parent)
            .arg("--cache-dir")
            .arg(&dir)
            .output()
            .await?;
        ensure!(
            out.status.success(),
            "wasmop render of {} failed: {}",
            module.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!(
            "cluster: {stem} compiled into the binary's module cache in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        anyhow::Ok(())
    })
    .await?;
    Ok(dir)
}

/// A host running `lang`'s cache-operator as [`GUEST`], watching `ns`.
pub async fn start_host(
    env: &TestEnv,
    kubeconfig: &std::path::Path,
    label: &str,
    ns: &str,
    lang: Lang,
) -> anyhow::Result<HostProcess> {
    let cache = compiled_modules(env, lang).await?;
    let module = guest_module(lang.module())?;
    HostProcess::start(
        env,
        kubeconfig,
        label,
        &[
            "--guest",
            &format!("{GUEST}={}", module.display()),
            "--namespace",
            ns,
            "--cache-dir",
            &cache.display().to_string(),
        ],
    )
}

/// CRD installed, a namespace, and a host running `lang`'s cache-operator
/// and watching only that namespace.
pub async fn setup(
    env: &TestEnv,
    prefix: &str,
    lang: Lang,
) -> anyhow::Result<(Client, String, HostProcess)> {
    let client = env.client();
    install_cache_crd(&client).await?;
    let ns = env
        .create_namespace(&format!("{prefix}-{}", lang.suffix()))
        .await?;
    let (_, kubeconfig) = super::admin_identity(env, &format!("wasmop-{ns}")).await?;
    let host = start_host(env, &kubeconfig, &ns, &ns, lang).await?;
    Ok((client, ns, host))
}

/// Waits until the Cache `name` shows `phase` at its generation and returns it.
pub async fn wait_phase(
    client: &Client,
    ns: &str,
    name: &str,
    phase: &str,
) -> anyhow::Result<kube::api::DynamicObject> {
    let api = caches(client, ns);
    wait_for(LONG, || async {
        let c = api.get(name).await?;
        let ok = at(&c, "/status/phase").and_then(|v| v.as_str()) == Some(phase)
            && at(&c, "/status/observedGeneration").and_then(|v| v.as_i64())
                == c.metadata.generation;
        if ok {
            Ok(Some(c))
        } else {
            bail!("status is {:?}", at(&c, "/status"))
        }
    })
    .await
    .with_context(|| format!("Cache {name} never reached phase {phase}"))
}

/// `case` for `lang`, named `<lang>::<case>`: one name filter
/// (`cache_operator::rust::`) selects a language's cases of a module.
// Only the suites with per-language cases use it.
#[allow(unused_macros)]
macro_rules! per_language {
    ($lang:expr; $($case:ident),* $(,)?) => {
        vec![$({
            let lang = $lang;
            wasmop_testenv::harness::Test::new(
                format!("{}::{}", lang.suffix(), stringify!($case)),
                move |env| $case(env, lang),
            )
        }),*]
    };
}

#[allow(unused_imports)]
pub(crate) use per_language;
