//! `wasmop test --guest <module.wasm> [--settings <file>] [--update] <cases…>`
//! (interface contract): one line per case, `ok` or `FAIL` with the first
//! difference as a path and both values, then a summary; exit 1 when a
//! case fails.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;

use super::{LimitArgs, one_line, read_component, read_settings, stem};
use crate::cases::{self, Runner};
use crate::runtime::{Limits, ModuleBytes, Runtime, RuntimeConfig};

/// `wasmop test`.
#[derive(Debug, clap::Args)]
pub struct TestArgs {
    /// The guest component, in any language.
    #[arg(long)]
    pub guest: PathBuf,
    /// The guest's settings for the cases that name none (any YAML value).
    #[arg(long, value_name = "FILE")]
    pub settings: Option<PathBuf>,
    /// Write each case's actual answer back as its expectation.
    #[arg(long)]
    pub update: bool,
    /// Case files (YAML, one case per document) or folders of them.
    #[arg(required = true, value_name = "CASES")]
    pub cases: Vec<PathBuf>,
    /// Directory for compiled modules (the host's `--cache-dir`).
    #[arg(long, env = "WASMOP_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Sandbox limits.
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// Counts of one run.
#[derive(Default)]
struct Tally {
    passed: usize,
    failed: usize,
    updated: usize,
}

/// Runs `wasmop test`.
pub fn test(args: TestArgs) -> ExitCode {
    match run(&args) {
        Ok(tally) => {
            let mut summary = format!("{} passed; {} failed", tally.passed, tally.failed);
            if args.update {
                summary.push_str(&format!("; {} updated", tally.updated));
            }
            let verdict = if tally.failed == 0 { "ok" } else { "FAILED" };
            println!("test result: {verdict}. {summary}");
            if tally.failed == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("error: {}", one_line(&e));
            ExitCode::FAILURE
        }
    }
}

fn run(args: &TestArgs) -> anyhow::Result<Tally> {
    let settings = args
        .settings
        .as_deref()
        .map(|path| -> anyhow::Result<serde_json::Value> {
            Ok(serde_json::from_str(&read_settings(path)?)?)
        })
        .transpose()?;
    let files = cases::files(&args.cases)?;
    let module = ModuleBytes::new(read_component(&args.guest)?);
    let runtime = Runtime::new(RuntimeConfig {
        cache_dir: args.cache_dir.clone(),
        ..RuntimeConfig::default()
    })?;
    let limits: Limits = args.limits.limits();
    let mut runner = Runner::new(runtime, stem(&args.guest), module, limits, settings);
    let mut tally = Tally::default();
    for path in files {
        let shown = path.display();
        let file = match cases::read(&path) {
            Ok(file) => file,
            Err(e) => {
                println!("FAIL {shown}: {}", one_line(&e));
                tally.failed += 1;
                continue;
            }
        };
        let mut rewritten = Vec::new();
        let mut changed = false;
        let mut unreadable = false;
        for case in file.cases {
            let mut case = match case {
                Ok(case) => case,
                Err(why) => {
                    println!("FAIL {shown}: {why}");
                    tally.failed += 1;
                    unreadable = true;
                    continue;
                }
            };
            let answer = match runner.answer(&case) {
                Ok(answer) => answer,
                Err(e) => {
                    println!("FAIL {shown}: {}: {}", case.name, one_line(&e));
                    tally.failed += 1;
                    rewritten.push(case);
                    continue;
                }
            };
            if args.update {
                let expect = cases::expectation(&case, &answer);
                if expect != case.expect {
                    case.expect = expect;
                    changed = true;
                    tally.updated += 1;
                    println!("updated {shown}: {}", case.name);
                } else {
                    println!("ok   {shown}: {}", case.name);
                }
                tally.passed += 1;
                rewritten.push(case);
                continue;
            }
            match cases::check(&case.expect, &answer) {
                Ok(()) => {
                    println!("ok   {shown}: {}", case.name);
                    tally.passed += 1;
                }
                Err(difference) => {
                    println!("FAIL {shown}: {}: {difference}", case.name);
                    if let cases::Answer::Failed(failure) = &answer {
                        for (i, frame) in failure.frames.iter().enumerate() {
                            println!("    {i}: {frame}");
                        }
                    }
                    tally.failed += 1;
                }
            }
            rewritten.push(case);
        }
        if args.update && changed {
            if unreadable {
                println!("FAIL {shown}: not rewritten, since a document in it is not a case");
                tally.failed += 1;
                continue;
            }
            std::fs::write(&path, cases::write(&rewritten)?)
                .with_context(|| format!("writing {shown}"))?;
        }
    }
    Ok(tally)
}
