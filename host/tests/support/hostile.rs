//! The hostile-host fixture: a fresh namespace, and a host that runs the
//! hostile guest from its file on the parents of that namespace.

use kube::Client;
use wasmop_testenv::TestEnv;

use super::{HostProcess, guest_arg, install_cache_crd, install_yaml, workspace};

/// A host running the hostile guest, and where its parents live.
pub struct HostileHost {
    /// The admin client of the test.
    pub client: Client,
    /// The namespace of the parents (the host's own namespace too).
    pub ns: String,
    /// The host's user, whose requests the audit log names.
    pub user: String,
    /// The host.
    pub host: HostProcess,
}

/// How a [`HostileHost`] starts; see [`HostileHost::build`].
pub struct Builder<'a> {
    env: &'a TestEnv,
    prefix: &'a str,
    admin: bool,
    cache_operator: bool,
    args: Vec<String>,
}

impl HostileHost {
    /// A hostile host in a namespace `<prefix>-…`, under the least-privilege
    /// roles `wasmop rbac` prints for its guests.
    pub fn build<'a>(env: &'a TestEnv, prefix: &'a str) -> Builder<'a> {
        Builder {
            env,
            prefix,
            admin: false,
            cache_operator: false,
            args: Vec::new(),
        }
    }

    /// [`Self::build`] with nothing more.
    pub async fn start(env: &TestEnv, prefix: &str) -> anyhow::Result<Self> {
        Self::build(env, prefix).start().await
    }
}

impl Builder<'_> {
    /// Runs the cache-operator beside the hostile guest.
    pub fn beside_cache_operator(mut self) -> Self {
        self.cache_operator = true;
        self
    }

    /// Runs the host as a cluster admin instead of under the generated
    /// roles.
    pub fn admin(mut self) -> Self {
        self.admin = true;
        self
    }

    /// Adds the command-line arguments `args`.
    pub fn args<S: Into<String>>(mut self, args: impl IntoIterator<Item = S>) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Installs the CRDs, creates the namespace and starts the host.
    pub async fn start(self) -> anyhow::Result<HostileHost> {
        let Self {
            env,
            prefix,
            admin,
            cache_operator,
            args,
        } = self;
        let client = env.client();
        install_yaml(&client, &workspace().join("guests/hostile/crd.yaml")).await?;
        let mut guests = vec!["hostile"];
        if cache_operator {
            install_cache_crd(&client).await?;
            guests.push("cache-operator");
        }
        let ns = env.create_namespace(prefix).await?;
        let (user, kubeconfig) = if admin {
            let user = format!("wasmop-{ns}");
            let (_, kubeconfig) = super::admin_identity(env, &user).await?;
            (user, kubeconfig)
        } else {
            super::least_privilege(env, &ns, &ns, &guests).await?
        };
        let mut all = Vec::new();
        for guest in guests {
            all.extend(["--guest".to_owned(), guest_arg(guest)?]);
        }
        all.extend(["--namespace".to_owned(), ns.clone()]);
        all.extend(args);
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        let host = HostProcess::start(env, &kubeconfig, &ns, &all)?;
        Ok(HostileHost {
            client,
            ns,
            user,
            host,
        })
    }
}
