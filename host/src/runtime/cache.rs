//! Compiled components keyed by the digest of their bytes.
//!
//! Compiling a component costs tens to hundreds of milliseconds; a restart or
//! a swap back to a version seen before should not pay it again. The cache
//! keeps every compiled component in memory and, when a directory is given,
//! writes the precompiled artifact to disk named by the module's sha256 and
//! the engine's compatibility hash, so artifacts of another wasmtime version
//! or configuration are never loaded.
//!
//! A miss is compiled by a [`Compiler`] (in an engine of its own, or in a
//! child process) and its artifact loaded into the long-lived engine, as
//! from the disk.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use super::{Compiler, Error, Result};

/// Where a compiled component came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheHit {
    /// Already compiled in this process.
    Memory,
    /// Loaded from the on-disk cache.
    Disk,
    /// Compiled now.
    Miss,
}

/// What [`ModuleCache::get_or_compile`] did.
#[derive(Clone, Debug)]
pub struct CacheOutcome {
    /// sha256 of the module bytes, hex.
    pub digest: String,
    /// Where it came from.
    pub hit: CacheHit,
    /// Time spent compiling or loading.
    pub elapsed: Duration,
}

impl CacheOutcome {
    /// How the compiled module was obtained, for people: "compiled in
    /// 21.3 s", "loaded from the disk cache in 140 ms", "already compiled".
    pub fn summary(&self) -> String {
        let took = if self.elapsed >= Duration::from_secs(1) {
            format!("{:.1} s", self.elapsed.as_secs_f64())
        } else {
            format!("{} ms", self.elapsed.as_millis())
        };
        match self.hit {
            CacheHit::Miss => format!("compiled in {took}"),
            CacheHit::Disk => format!("loaded from the disk cache in {took}"),
            CacheHit::Memory => "already compiled".to_owned(),
        }
    }
}

/// Compiled versions no guest runs that stay in memory, most recently used
/// first, so that swapping back to the previous version costs no compile
/// and no disk read; older ones are dropped (the disk cache keeps them).
pub const KEEP_UNUSED: usize = 2;

/// The compiled-module cache.
pub struct ModuleCache {
    engine: Engine,
    compiler: Compiler,
    dir: Option<PathBuf>,
    memory: Mutex<Memory>,
}

/// Compiled components by digest, with the order they were last used in.
#[derive(Default)]
struct Memory {
    components: HashMap<String, (Component, u64)>,
    clock: u64,
}

/// sha256 of `bytes` as lowercase hex.
pub fn digest(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Whether `bytes` begin as a component does (the `\0asm` magic, then the
/// component encoding's version and layer), not as a core module.
pub fn is_component(bytes: &[u8]) -> bool {
    bytes.starts_with(b"\0asm\x0d\x00\x01\x00")
}

/// A module's bytes with their digest, computed once when the bytes are
/// fetched: everything downstream (the change check, the cache, the
/// version's identity) reads the digest instead of hashing again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleBytes {
    bytes: std::sync::Arc<[u8]>,
    digest: String,
}

impl ModuleBytes {
    /// `bytes`, hashed.
    pub fn new(bytes: Vec<u8>) -> Self {
        let digest = digest(&bytes);
        Self {
            bytes: bytes.into(),
            digest,
        }
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// sha256 of the bytes, lowercase hex.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

impl ModuleCache {
    /// A cache for `engine`, persisted under `dir` when given; `compiler`
    /// compiles what it misses (configured as `engine`, so that its
    /// artifacts load into it).
    pub fn new(engine: Engine, compiler: Compiler, dir: Option<PathBuf>) -> std::io::Result<Self> {
        if let Some(dir) = &dir {
            std::fs::create_dir_all(dir)?;
        }
        Ok(Self {
            engine,
            compiler,
            dir,
            memory: Mutex::default(),
        })
    }

    /// Number of components held in memory.
    pub fn len(&self) -> usize {
        self.memory.lock().expect("cache lock").components.len()
    }

    /// Whether no component is held in memory.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Returns the compiled component for `module`, compiling only on a miss.
    pub fn get_or_compile(&self, module: &ModuleBytes) -> Result<(Component, CacheOutcome)> {
        let started = Instant::now();
        let digest = module.digest().to_owned();
        let bytes = module.bytes();
        {
            let mut memory = self.memory.lock().expect("cache lock");
            memory.clock += 1;
            let clock = memory.clock;
            if let Some((c, used)) = memory.components.get_mut(&digest) {
                *used = clock;
                return Ok((c.clone(), outcome(digest, CacheHit::Memory, started)));
            }
        }
        let path = self.artifact_path(&digest);
        if let Some(path) = path.as_ref().filter(|p| p.exists()) {
            match self.load_artifact(path) {
                Ok(c) => {
                    self.remember(&digest, &c);
                    return Ok((c, outcome(digest, CacheHit::Disk, started)));
                }
                Err(e) => {
                    tracing::warn!(path = %path.display(), "ignoring unusable cached artifact: {e:#}")
                }
            }
        }
        let artifact = self.compiler.compile(bytes).map_err(Error::Compile)?;
        // Cranelift's working memory, if it compiled here, went with the
        // compiling engine; hand it back to the system.
        crate::memory::trim();
        if let Some(path) = &path
            && let Err(e) = store_artifact(&artifact, path)
        {
            tracing::warn!(path = %path.display(), "could not write compiled module cache: {e:#}");
        }
        let component = self.load_compiled(&artifact).map_err(Error::Compile)?;
        self.remember(&digest, &component);
        Ok((component, outcome(digest, CacheHit::Miss, started)))
    }

    /// Drops from memory every compiled version `in_use` refuses (versions
    /// no guest runs any more) but the [`KEEP_UNUSED`] used last; the disk
    /// cache keeps them. Returns how many were dropped.
    pub fn retain(&self, mut in_use: impl FnMut(&str) -> bool) -> usize {
        let mut memory = self.memory.lock().expect("cache lock");
        let mut unused: Vec<(u64, String)> = memory
            .components
            .iter()
            .filter(|(digest, _)| !in_use(digest))
            .map(|(digest, (_, used))| (*used, digest.clone()))
            .collect();
        unused.sort_unstable_by(|a, b| b.cmp(a));
        let dropped = unused.len().saturating_sub(KEEP_UNUSED);
        for (_, digest) in unused.into_iter().skip(KEEP_UNUSED) {
            memory.components.remove(&digest);
        }
        dropped
    }

    fn remember(&self, digest: &str, component: &Component) {
        let mut memory = self.memory.lock().expect("cache lock");
        memory.clock += 1;
        let clock = memory.clock;
        memory
            .components
            .insert(digest.to_string(), (component.clone(), clock));
    }

    fn artifact_path(&self, digest: &str) -> Option<PathBuf> {
        let mut h = DefaultHasher::new();
        self.engine.precompile_compatibility_hash().hash(&mut h);
        let compat = h.finish();
        self.dir
            .as_ref()
            .map(|d| d.join(format!("{digest}-{compat:016x}.cwasm")))
    }

    #[allow(unsafe_code)]
    fn load_artifact(&self, path: &PathBuf) -> wasmtime::Result<Component> {
        // SAFETY: `deserialize_file` trusts its input to be a wasmtime
        // artifact. The cache directory holds only artifacts this process
        // (or an earlier run of it) wrote with `Component::serialize`, named
        // by the module digest and this engine's compatibility hash; wasmtime
        // additionally checks the artifact header against the engine.
        Ok(unsafe { Component::deserialize_file(&self.engine, path)? })
    }

    #[allow(unsafe_code)]
    fn load_compiled(&self, artifact: &[u8]) -> wasmtime::Result<Component> {
        // SAFETY: `deserialize` trusts its input to be a wasmtime artifact.
        // `artifact` is what `precompile_component` of an engine configured
        // as this one returned a moment ago, in this process or in this
        // executable's `compile-worker`; wasmtime additionally checks its
        // header against the engine.
        Ok(unsafe { Component::deserialize(&self.engine, artifact)? })
    }
}

/// Writes a compiled artifact: first to a temporary file, then renamed, so
/// that a crash never leaves a torn artifact behind.
fn store_artifact(artifact: &[u8], path: &PathBuf) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, artifact)?;
    std::fs::rename(&tmp, path)
}

fn outcome(digest: String, hit: CacheHit, started: Instant) -> CacheOutcome {
    CacheOutcome {
        digest,
        hit,
        elapsed: started.elapsed(),
    }
}
