//! `wasmop metacontroller build <definition.yaml> --hooks <dir> -o <out>`:
//! a Metacontroller `CompositeController` or `DecoratorController` and the
//! folder of hook files its hook server would serve, made into one hook guest
//! (`wit/metacontroller@0.1.0`), nothing of either changed.
//!
//! 1. The definition is read as Metacontroller publishes it
//!    ([`crate::metacontroller::definition`]): a field this host does not
//!    know or cannot honour is refused with its path.
//! 2. Each resource it names (`apiVersion` and the plural `resource`) is
//!    resolved to its kind and scope: Kubernetes' own resources from
//!    k8s-openapi's types, any other by asking the cluster the kubeconfig
//!    names (its CRD must be installed, as Metacontroller needs it too).
//! 3. Each hook's URL path `/<name>` is the file `<name>.js` or `<name>.py`
//!    of the hooks folder, as Metacontroller's nodejs server and its Python
//!    examples serve them; a folder with one Python file uses it for every
//!    hook (a Python hook server answers every path itself).
//! 4. A project is written to a temporary folder: the hooks folder copied
//!    as it is, the language's adapter from the SDK (`sdk-ts`'s
//!    `src/metacontroller.ts` or `sdk-py`'s `wasmop_hooks`), its build
//!    script, the WIT, and an entry that embeds the definition with the
//!    kinds and names every hook; the SDK's build script makes the
//!    component (`node build.mjs hooks`, `python3 build.py hooks`). The
//!    hooks are loaded while it builds, so a hook file that does not load
//!    is refused here.

use std::any::TypeId;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use k8s_openapi::NamespaceResourceScope;
use serde_json::Value;

use super::{Built, Error, Lang, Result, run};
use crate::metacontroller::definition::{self, Definition, Embedded, Resolved, ResourceName};
use crate::scaffold;

/// How long a resource the cluster does not serve yet is asked for again
/// (a CRD applied just before the build).
const DISCOVERY_WAIT: Duration = Duration::from_secs(10);

/// The hook guest's WIT.
const HOOKS_WIT: &str = include_str!("../../../wit/metacontroller@0.1.0/hooks.wit");

/// The TypeScript SDK's files a JavaScript hook guest is built with.
const JS_FILES: &[(&str, &str)] = &[
    ("sdk/build.mjs", scaffold::TS_BUILD_SCRIPT),
    (
        "sdk/package.json",
        include_str!("../../../guests/sdk-ts/package.json"),
    ),
    (
        "sdk/src/metacontroller.ts",
        include_str!("../../../guests/sdk-ts/src/metacontroller.ts"),
    ),
];

/// The Python SDK's files a Python hook guest is built with.
const PY_FILES: &[(&str, &str)] = &[
    ("build.py", scaffold::PY_BUILD_SCRIPT),
    ("requirements.txt", scaffold::PY_REQUIREMENTS),
    (
        "wasmop_hooks/__init__.py",
        include_str!("../../../guests/sdk-py/wasmop_hooks/__init__.py"),
    ),
];

/// What to build.
#[derive(Clone, Debug)]
pub struct Options {
    /// The file holding the definition.
    pub definition: PathBuf,
    /// The folder of hook files.
    pub hooks: PathBuf,
    /// The definition to take where the file holds several.
    pub name: Option<String>,
    /// The component to write.
    pub out: PathBuf,
}

/// A definition read and its resources to resolve.
#[derive(Clone, Debug)]
pub struct Read {
    /// The definition.
    pub definition: Definition,
}

impl Read {
    /// Reads the definition `options` names.
    pub fn from(options: &Options) -> Result<Self> {
        let text = std::fs::read_to_string(&options.definition)
            .map_err(Error::io("reading", &options.definition))?;
        let object =
            definition::pick(&text, options.name.as_deref()).map_err(|e| refused(options, e))?;
        let definition = definition::read(&object).map_err(|e| refused(options, e))?;
        Ok(Self { definition })
    }

    /// The parent resource, then each child resource.
    pub fn resources(&self) -> Vec<ResourceName> {
        std::iter::once(self.definition.parent.clone())
            .chain(self.definition.children.iter().map(|c| c.name.clone()))
            .collect()
    }
}

fn refused(options: &Options, e: definition::Error) -> Error {
    Error::Project(format!("{}: {e}", options.definition.display()))
}

/// A resource of Kubernetes itself, from k8s-openapi's types.
fn builtin(name: &ResourceName) -> Option<Resolved> {
    fn entry<K: k8s_openapi::Resource<Scope: 'static>>() -> (&'static str, &'static str, Resolved) {
        (
            K::API_VERSION,
            K::URL_PATH_SEGMENT,
            Resolved {
                group: K::GROUP.to_owned(),
                version: K::VERSION.to_owned(),
                kind: K::KIND.to_owned(),
                namespaced: TypeId::of::<K::Scope>() == TypeId::of::<NamespaceResourceScope>(),
            },
        )
    }
    use k8s_openapi::api::{
        apps::v1 as apps, autoscaling::v2 as autoscaling, batch::v1 as batch, core::v1 as core,
        networking::v1 as networking, policy::v1 as policy, rbac::v1 as rbac,
    };
    let table = [
        entry::<core::ConfigMap>(),
        entry::<core::Endpoints>(),
        entry::<core::LimitRange>(),
        entry::<core::Namespace>(),
        entry::<core::PersistentVolume>(),
        entry::<core::PersistentVolumeClaim>(),
        entry::<core::Pod>(),
        entry::<core::ResourceQuota>(),
        entry::<core::Secret>(),
        entry::<core::Service>(),
        entry::<core::ServiceAccount>(),
        entry::<apps::DaemonSet>(),
        entry::<apps::Deployment>(),
        entry::<apps::ReplicaSet>(),
        entry::<apps::StatefulSet>(),
        entry::<autoscaling::HorizontalPodAutoscaler>(),
        entry::<batch::CronJob>(),
        entry::<batch::Job>(),
        entry::<networking::Ingress>(),
        entry::<networking::NetworkPolicy>(),
        entry::<policy::PodDisruptionBudget>(),
        entry::<rbac::ClusterRole>(),
        entry::<rbac::ClusterRoleBinding>(),
        entry::<rbac::Role>(),
        entry::<rbac::RoleBinding>(),
    ];
    table
        .into_iter()
        .find(|(api, plural, _)| *api == name.api_version && *plural == name.resource)
        .map(|(_, _, resolved)| resolved)
}

/// Resolves every resource: Kubernetes' own from the table, the others by
/// asking the cluster (only when one is needed).
pub fn resolve(names: &[ResourceName]) -> Result<Vec<Resolved>> {
    let mut out: Vec<Option<Resolved>> = names.iter().map(builtin).collect();
    if out.iter().all(Option::is_some) {
        return Ok(out.into_iter().flatten().collect());
    }
    let asked = tokio::runtime::Runtime::new()
        .map_err(|e| Error::Project(format!("starting the async runtime: {e}")))?
        .block_on(ask_cluster(names, &out))?;
    for (slot, resolved) in out.iter_mut().zip(asked) {
        if slot.is_none() {
            *slot = resolved;
        }
    }
    Ok(out.into_iter().flatten().collect())
}

async fn ask_cluster(
    names: &[ResourceName],
    known: &[Option<Resolved>],
) -> Result<Vec<Option<Resolved>>> {
    let first = names
        .iter()
        .zip(known)
        .find(|(_, k)| k.is_none())
        .map(|(n, _)| n)
        .expect("one to ask");
    let unreachable = |why: String| {
        Error::Project(format!(
            "{}: {} of {} is not one of Kubernetes' own resources, and the cluster cannot be asked ({why}): install its CustomResourceDefinition and point KUBECONFIG at the cluster",
            first.path, first.resource, first.api_version
        ))
    };
    let client = kube::Client::try_default()
        .await
        .map_err(|e| unreachable(e.to_string()))?;
    let mut out = Vec::new();
    for (name, known) in names.iter().zip(known) {
        if known.is_some() {
            out.push(None);
            continue;
        }
        let (group, version) = name.group_version();
        let gv = kube::core::GroupVersion::gv(group, version);
        // A CRD applied a moment ago is served once the API server has
        // established it: ask again for a while before refusing.
        let waited_until = tokio::time::Instant::now() + DISCOVERY_WAIT;
        let (resource, capabilities) = loop {
            let found = tokio::time::timeout(
                Duration::from_secs(30),
                kube::discovery::oneshot::pinned_group(&client, &gv),
            )
            .await
            .map_err(|_| unreachable("discovery took longer than 30 s".into()))?
            .ok()
            .and_then(|api_group| {
                api_group
                    .versioned_resources(version)
                    .into_iter()
                    .find(|(resource, _)| resource.plural == name.resource)
            });
            match found {
                Some(found) => break found,
                None if tokio::time::Instant::now() < waited_until => {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                None => {
                    return Err(Error::Project(format!(
                        "{}: the cluster serves no resource {} in {} (asked for {} s)",
                        name.path,
                        name.resource,
                        name.api_version,
                        DISCOVERY_WAIT.as_secs()
                    )));
                }
            }
        };
        out.push(Some(Resolved {
            group: resource.group,
            version: resource.version,
            kind: resource.kind,
            namespaced: capabilities.scope == kube::discovery::Scope::Namespaced,
        }));
    }
    Ok(out)
}

/// The hook files: each route of the definition to its file, and the
/// language they are written in.
fn hook_files(definition: &Definition, dir: &Path) -> Result<(Lang, Vec<(String, PathBuf)>)> {
    let routes = definition.hooks.routes();
    let entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(Error::io("reading", dir))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    let with = |ext: &str| -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = entries
            .iter()
            .filter(|p| p.extension().is_some_and(|e| e == ext))
            .cloned()
            .collect();
        files.sort();
        files
    };
    let (js, py) = (with("js"), with("py"));
    let named = |route: &str, ext: &str| dir.join(format!("{route}.{ext}"));
    let lang = if routes.iter().all(|r| named(r, "js").is_file()) {
        Lang::TypeScript
    } else if routes.iter().all(|r| named(r, "py").is_file()) || py.len() == 1 {
        Lang::Python
    } else {
        return Err(Error::Project(format!(
            "{}: no hook file for {}: a hook at the URL path /<name> is the file <name>.js or <name>.py there (or the folder's one Python file); it holds {}",
            dir.display(),
            routes
                .iter()
                .map(|r| format!("/{r}"))
                .collect::<Vec<_>>()
                .join(" and "),
            if entries.is_empty() {
                "no file".to_owned()
            } else {
                entries
                    .iter()
                    .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        )));
    };
    let files = match lang {
        // Metacontroller's nodejs server serves every `.js` file of the
        // folder by its name.
        Lang::TypeScript => js
            .iter()
            .filter_map(|p| Some((p.file_stem()?.to_string_lossy().into_owned(), p.clone())))
            .collect(),
        _ => routes
            .iter()
            .map(|r| {
                let file = named(r, "py");
                (r.clone(), if file.is_file() { file } else { py[0].clone() })
            })
            .collect(),
    };
    Ok((lang, files))
}

/// Checks that the hooks folder has a file for every hook the definition
/// names, before anything else is done.
pub fn check_hooks(options: &Options, read: &Read) -> Result<()> {
    let dir = options
        .hooks
        .canonicalize()
        .map_err(Error::io("reading", &options.hooks))?;
    hook_files(&read.definition, &dir).map(|_| ())
}

/// Builds the hook guest: `read` resolved to `kinds`, the hooks of
/// `options.hooks`, into `options.out`.
pub fn build(options: &Options, read: &Read, kinds: Vec<Resolved>) -> Result<Built> {
    let hooks_dir = options
        .hooks
        .canonicalize()
        .map_err(Error::io("reading", &options.hooks))?;
    let (lang, files) = hook_files(&read.definition, &hooks_dir)?;
    let embedded = serde_json::to_string(&Embedded {
        definition: read.definition.object.clone(),
        kinds,
    })
    .expect("a definition serialises");
    // The module is checked as the host will read it.
    crate::metacontroller::Controller::from_embedded(&embedded)
        .map_err(|e| Error::Project(format!("{}: {e}", options.definition.display())))?;
    let out = std::path::absolute(&options.out).map_err(Error::io("resolving", &options.out))?;
    if let Some(parent) = out.parent() {
        std::fs::create_dir_all(parent).map_err(Error::io("creating", parent))?;
    }
    // Removed when dropped, at the end of the build.
    let project = tempfile::Builder::new()
        .prefix("wasmop-metacontroller-")
        .tempdir()
        .map_err(Error::io("creating", &std::env::temp_dir()))?;
    let root = project.path().to_owned();
    copy_dir(&hooks_dir, &root.join("hooks"))?;
    write(&root.join("wit/hooks.wit"), HOOKS_WIT)?;
    let mut steps = Vec::new();
    let name_of = |path: &Path| {
        path.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    match lang {
        Lang::TypeScript => {
            for (file, text) in JS_FILES {
                write(&root.join(file), text)?;
            }
            let mut entry = String::from(
                "// Generated by `wasmop metacontroller build`.\nimport { exportHooks } from \"./sdk/src/metacontroller.ts\";\n",
            );
            for (i, (_, path)) in files.iter().enumerate() {
                entry.push_str(&format!(
                    "import hook{i} from \"./hooks/{}\";\n",
                    name_of(path)
                ));
            }
            entry.push_str(&format!(
                "export const hooks = exportHooks({}, {{\n",
                Value::String(embedded.clone())
            ));
            for (i, (route, _)) in files.iter().enumerate() {
                entry.push_str(&format!("  {}: hook{i},\n", Value::String(route.clone())));
            }
            entry.push_str("});\n");
            write(&root.join("entry.js"), &entry)?;
            let mut command = Command::new("node");
            // The SDK (an ES module package) sits in a folder of its own,
            // so the hook files are CommonJS, as Node.js reads them beside
            // Metacontroller's server.
            command
                .arg(root.join("sdk/build.mjs"))
                .args(["hooks", "entry.js", "--wit"])
                .arg(root.join("wit"))
                .arg("--out")
                .arg(&out)
                .arg("--project")
                .arg(root.join("sdk"))
                .current_dir(&root);
            run(&mut command, "build.mjs hooks", &mut steps)
                .map_err(|e| not_loaded(&hooks_dir, e))?;
        }
        _ => {
            for (file, text) in PY_FILES {
                write(&root.join(file), text)?;
            }
            let mut app = String::from(
                "\"\"\"Generated by `wasmop metacontroller build`.\"\"\"\nimport os\n\nfrom wasmop_hooks import export_hooks\n\n_HOOKS = os.path.join(os.path.dirname(__file__), \"hooks\")\n\nHooks = export_hooks(\n",
            );
            app.push_str(&format!(
                "    {},\n    {{\n",
                Value::String(embedded.clone())
            ));
            for (route, path) in &files {
                app.push_str(&format!(
                    "        {}: os.path.join(_HOOKS, {}),\n",
                    Value::String(route.clone()),
                    Value::String(name_of(path))
                ));
            }
            app.push_str("    },\n)\n");
            write(&root.join("app.py"), &app)?;
            let mut command = Command::new("python3");
            command
                .arg(root.join("build.py"))
                .arg("hooks")
                .arg(&root)
                .arg("--wit")
                .arg(root.join("wit"))
                .arg("--out")
                .arg(&out)
                .current_dir(&root);
            run(&mut command, "build.py hooks", &mut steps)
                .map_err(|e| not_loaded(&hooks_dir, e))?;
        }
    }
    let bytes = std::fs::metadata(&out)
        .map_err(Error::io("reading", &out))?
        .len();
    Ok(Built {
        lang,
        out,
        bytes,
        world: format!(
            "hook-guest: {} {}, hooks {}",
            match read.definition.flavour {
                definition::Flavour::Composite => "CompositeController",
                definition::Flavour::Decorator => "DecoratorController",
            },
            read.definition.name,
            files
                .iter()
                .map(|(route, path)| format!("/{route} = {}", name_of(path)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        steps,
    })
}

/// A failed build step, named as what it most likely is: a hook file that
/// does not parse or load (the tool's own words are above it).
fn not_loaded(dir: &Path, e: Error) -> Error {
    Error::Project(format!(
        "the hook files of {} do not load (the error above names the file and line): {e}",
        dir.display()
    ))
}

fn write(path: &Path, text: &str) -> Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(Error::io("creating", parent))?;
    }
    std::fs::write(path, text).map_err(Error::io("writing", path))
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).map_err(Error::io("creating", to))?;
    for entry in std::fs::read_dir(from).map_err(Error::io("reading", from))? {
        let entry = entry.map_err(Error::io("reading", from))?;
        let path = entry.path();
        let target = to.join(entry.file_name());
        if path.is_dir() {
            copy_dir(&path, &target)?;
        } else {
            std::fs::copy(&path, &target).map_err(Error::io("copying", &path))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubernetes_own_resources_resolve_without_a_cluster() {
        let name = |api: &str, resource: &str| ResourceName {
            path: "spec".into(),
            api_version: api.into(),
            resource: resource.into(),
        };
        let pods = builtin(&name("v1", "pods")).unwrap();
        assert_eq!(
            (pods.group.as_str(), pods.kind.as_str(), pods.namespaced),
            ("", "Pod", true)
        );
        let sets = builtin(&name("apps/v1", "statefulsets")).unwrap();
        assert_eq!(
            (sets.group.as_str(), sets.kind.as_str()),
            ("apps", "StatefulSet")
        );
        assert!(
            !builtin(&name("rbac.authorization.k8s.io/v1", "clusterroles"))
                .unwrap()
                .namespaced
        );
        assert!(builtin(&name("ctl.enisoc.com/v1", "catsets")).is_none());
        assert!(builtin(&name("apps/v1", "pods")).is_none());
    }
}
