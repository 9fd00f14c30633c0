//! `wasmop render`: one reconcile, admission or conversion offline, printed.

use std::path::PathBuf;

use anyhow::{Context as _, bail};
use serde_json::Value;

use super::{LimitArgs, Output, load_one, outbound_hosts, read_settings};
use crate::runtime::Limits;

/// `wasmop render`.
#[derive(Debug, clap::Args)]
pub struct RenderArgs {
    /// The guest component.
    #[arg(long)]
    pub guest: PathBuf,
    /// The parent object (YAML or JSON).
    #[arg(long, required_unless_present_any = ["admission", "convert"])]
    pub parent: Option<PathBuf>,
    /// Instead of a reconcile: an `admission.k8s.io/v1` AdmissionReview
    /// (YAML or JSON) run through the guest's `admit` as the host's
    /// mutating and then validating webhook would.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["parent", "convert"])]
    pub admission: Option<PathBuf>,
    /// Instead of a reconcile: objects (YAML, several documents allowed)
    /// converted by the guest's `convert` to `--to`.
    #[arg(long, value_name = "FILE", requires = "to", conflicts_with = "parent")]
    pub convert: Option<PathBuf>,
    /// The apiVersion `--convert` converts to, e.g. apps.example.com/v1beta1.
    #[arg(long, value_name = "API_VERSION", requires = "convert")]
    pub to: Option<String>,
    /// Observed children (YAML, several documents allowed); repeatable.
    #[arg(long)]
    pub observed: Vec<PathBuf>,
    /// Objects of the guest's related kinds (YAML, several documents
    /// allowed); those that map to the parent reach the guest. Repeatable.
    #[arg(long)]
    pub related: Vec<PathBuf>,
    /// Hand the guest Secret values (the guest list's `secretValues`);
    /// without it each value is its SHA-256, as in the cluster.
    #[arg(long)]
    pub secret_values: bool,
    /// Render the deletion path (as if the parent had a deletionTimestamp).
    #[arg(long)]
    pub deleting: bool,
    /// The guest's settings (any YAML value, as the guest list's `settings`).
    #[arg(long, value_name = "FILE")]
    pub settings: Option<PathBuf>,
    /// What the guest may call over `wasi:http` (`scheme://host[:port]`, as
    /// the guest list's `allowedOutboundHosts`); repeatable. The calls are
    /// made. Default: nothing.
    #[arg(long = "allow-outbound", value_name = "URL")]
    pub allow_outbound: Vec<String>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value = "yaml")]
    pub output: Output,
    /// Directory for compiled modules (the host's `--cache-dir`), so the
    /// next render of the same module skips compilation.
    #[arg(long, env = "WASMOP_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Sandbox limits.
    #[command(flatten)]
    pub limits: LimitArgs,
}

fn read_objects(path: &PathBuf) -> anyhow::Result<Vec<Value>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text)
        .with_context(|| format!("parsing {}", path.display()))?;
    let mut out = Vec::new();
    for doc in docs {
        match doc {
            Value::Null => {}
            // A `kind: List` (as `kubectl get -o yaml` prints) is flattened.
            Value::Object(ref m) if m.get("kind").and_then(Value::as_str) == Some("List") => {
                out.extend(
                    m.get("items")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default(),
                );
            }
            Value::Object(_) => out.push(doc),
            _ => bail!(
                "{}: every document must be a Kubernetes object",
                path.display()
            ),
        }
    }
    Ok(out)
}

pub(super) fn render(args: &RenderArgs) -> anyhow::Result<()> {
    let settings = args.settings.as_deref().map(read_settings).transpose()?;
    let limits = Limits {
        outbound: outbound_hosts(&args.allow_outbound)?,
        ..args.limits.limits()
    };
    let guest = load_one(&args.guest, limits, settings, args.cache_dir.as_deref())?;
    if let Some(path) = &args.admission {
        let mut reviews = read_objects(path)?;
        if reviews.len() != 1 {
            bail!(
                "{}: expected exactly one AdmissionReview, found {}",
                path.display(),
                reviews.len()
            );
        }
        let admitted = crate::webhook::offline::admit(&guest, reviews.remove(0))
            .with_context(|| format!("admitting {}", path.display()))?;
        match args.output {
            Output::Json => println!("{}", serde_json::to_string_pretty(&admitted)?),
            Output::Yaml => print!("{}", serde_saphyr::to_string(&admitted)?),
        }
        return Ok(());
    }
    if let (Some(path), Some(to)) = (&args.convert, &args.to) {
        let objects = read_objects(path)?;
        let converted = crate::webhook::offline::convert(&guest, &objects, to)
            .with_context(|| format!("converting {}", path.display()))?;
        return match args.output {
            Output::Json => {
                println!("{}", serde_json::to_string_pretty(&converted)?);
                Ok(())
            }
            Output::Yaml => {
                for object in &converted {
                    print!("---\n{}", serde_saphyr::to_string(object)?);
                }
                Ok(())
            }
        };
    }
    let parent = args.parent.as_ref().context("--parent is required")?;
    let mut parents = read_objects(parent)?;
    if parents.len() != 1 {
        bail!(
            "{}: expected exactly one parent object, found {}",
            parent.display(),
            parents.len()
        );
    }
    let mut inputs = crate::render::Inputs {
        deleting: args.deleting,
        secret_values: args.secret_values,
        ..Default::default()
    };
    for path in &args.observed {
        inputs.observed.extend(read_objects(path)?);
    }
    for path in &args.related {
        inputs.related.extend(read_objects(path)?);
    }
    let rendered =
        crate::render::render(&guest, parents.remove(0), inputs).inspect_err(print_stack)?;
    for refused in &rendered.refused {
        eprintln!(
            "wasmop render: the host refused {refused} (allow a host with --allow-outbound <scheme://host[:port]>)"
        );
    }
    match args.output {
        Output::Json => println!("{}", serde_json::to_string_pretty(&rendered)?),
        Output::Yaml => print!("{}", serde_saphyr::to_string(&rendered)?),
    }
    Ok(())
}

/// A trapping guest's own stack, innermost first, on stderr.
fn print_stack(error: &crate::render::Error) {
    if let crate::render::Error::Call { source, .. } = error {
        let frames = source.frames();
        if !frames.is_empty() {
            eprintln!("guest stack (innermost first):");
            for (i, frame) in frames.iter().enumerate() {
                eprintln!("  {i}: {frame}");
            }
        }
    }
}
