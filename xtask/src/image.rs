//! `cargo xtask image`: the host's container image, as an OCI image archive
//! built without a container daemon.
//!
//! The same image as the `Dockerfile`: a static `wasmop` (musl, so it runs
//! on an empty base) at `/wasmop`, the cache-operator's modules under
//! `/modules` (where `deploy/host/guests.yaml` lists them), entrypoint
//! `/wasmop`, command `run`, user 65532. The layer is a reproducible tar
//! (sorted, zero times, root-owned), gzipped; config, manifest and index are
//! written with `oci-spec`'s types; the layout directory is then archived to
//! `target/image/wasmop-<version>.oci.tar`, which `skopeo`, `podman load`,
//! `ctr images import` and `kind load image-archive` take.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use oci_spec::image::{
    ConfigBuilder, Descriptor, DescriptorBuilder, ImageConfigurationBuilder, ImageIndexBuilder,
    ImageManifestBuilder, MediaType, RootFsBuilder, SCHEMA_VERSION,
};
use sha2::{Digest, Sha256};

use crate::process::{cargo, run};

/// The Rust target of the image's binary.
pub const TARGET: &str = "x86_64-unknown-linux-musl";
/// The image's tag (the workspace version).
pub const TAG: &str = env!("CARGO_PKG_VERSION");
/// The guests the image carries.
const MODULES: &[&str] = &["cache-operator", "cache-operator-v2"];
/// The unprivileged user the image runs as (distroless' `nonroot`).
const USER: &str = "65532:65532";

/// Where the archive goes.
pub fn archive_path() -> PathBuf {
    crate::guests::target_dir()
        .join("image")
        .join(format!("wasmop-{TAG}.oci.tar"))
}

/// Builds the binary and the guests, then the archive; returns its path.
pub fn build() -> Result<PathBuf> {
    let root = crate::guests::workspace_root();
    crate::toolchain::ensure_target(&root, TARGET)?;
    let mut command = cargo(&[
        "build",
        "--profile",
        "dist",
        "--target",
        TARGET,
        "-p",
        "wasmop-host",
        "--bin",
        "wasmop",
    ]);
    // ring's C code needs a C compiler for the target; the system gcc does
    // (it is freestanding code) where no musl-gcc is installed.
    if which("x86_64-linux-musl-gcc").is_none() && which("musl-gcc").is_none() {
        command.env("CC_x86_64_unknown_linux_musl", "gcc");
    }
    command.current_dir(&root);
    run(&mut command).context("building the static wasmop binary")?;
    crate::guests::build_all()?;
    // The `dist` profile builds without debug info and strips at link
    // time (Cargo.toml), so the archive takes the binary as built.
    let binary = crate::guests::target_dir().join(TARGET).join("dist/wasmop");
    let archive = archive_path();
    let digest = assemble(&binary, &crate::guests::guest_dir(), &archive)?;
    eprintln!("--> image wasmop:{TAG} ({digest}) in {}", archive.display());
    Ok(archive)
}

fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|dir| Path::new(dir).join(tool))
        .find(|path| path.is_file())
}

/// Writes the OCI layout for `binary` and the guests in `guests` and
/// archives it at `archive`; returns the manifest's digest.
pub fn assemble(binary: &Path, guests: &Path, archive: &Path) -> Result<String> {
    let mut files = vec![(
        "wasmop".to_owned(),
        std::fs::read(binary).with_context(|| format!("reading {}", binary.display()))?,
        0o755,
    )];
    for module in MODULES {
        let path = guests.join(format!("{module}.wasm"));
        files.push((
            format!("modules/{module}.wasm"),
            std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?,
            0o644,
        ));
    }
    let layer_tar = reproducible_tar(&[("modules/", 0o755)], &files)?;
    let diff_id = sha256(&layer_tar);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&layer_tar)?;
    let layer = gz.finish()?;

    let config = ImageConfigurationBuilder::default()
        .architecture("amd64")
        .os("linux")
        .config(
            ConfigBuilder::default()
                .entrypoint(vec!["/wasmop".to_owned()])
                .cmd(vec!["run".to_owned()])
                .user(USER)
                .build()?,
        )
        .rootfs(
            RootFsBuilder::default()
                .typ("layers")
                .diff_ids(vec![diff_id])
                .build()?,
        )
        .build()?;
    let config = serde_json::to_vec(&config)?;
    let manifest = ImageManifestBuilder::default()
        .schema_version(SCHEMA_VERSION)
        .media_type(MediaType::ImageManifest)
        .config(descriptor(MediaType::ImageConfig, &config)?)
        .layers(vec![descriptor(MediaType::ImageLayerGzip, &layer)?])
        .build()?;
    let manifest = serde_json::to_vec(&manifest)?;
    let mut manifest_descriptor = descriptor(MediaType::ImageManifest, &manifest)?;
    manifest_descriptor.set_annotations(Some(
        [
            (
                "org.opencontainers.image.ref.name".to_owned(),
                TAG.to_owned(),
            ),
            (
                "io.containerd.image.name".to_owned(),
                format!("docker.io/library/wasmop:{TAG}"),
            ),
        ]
        .into(),
    ));
    let manifest_digest = manifest_descriptor.digest().to_string();
    let index = ImageIndexBuilder::default()
        .schema_version(SCHEMA_VERSION)
        .media_type(MediaType::ImageIndex)
        .manifests(vec![manifest_descriptor])
        .build()?;

    let blob = |bytes: &[u8]| {
        (
            format!("blobs/sha256/{}", hex(&Sha256::digest(bytes))),
            bytes.to_vec(),
            0o644,
        )
    };
    let layout = vec![
        (
            "oci-layout".to_owned(),
            br#"{"imageLayoutVersion":"1.0.0"}"#.to_vec(),
            0o644,
        ),
        ("index.json".to_owned(), serde_json::to_vec(&index)?, 0o644),
        blob(&manifest),
        blob(&config),
        blob(&layer),
    ];
    let outer = reproducible_tar(&[("blobs/", 0o755), ("blobs/sha256/", 0o755)], &layout)?;
    if let Some(dir) = archive.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(archive, outer).with_context(|| format!("writing {}", archive.display()))?;
    Ok(manifest_digest)
}

fn descriptor(media_type: MediaType, bytes: &[u8]) -> Result<Descriptor> {
    Ok(DescriptorBuilder::default()
        .media_type(media_type)
        .digest(
            format!("sha256:{}", hex(&Sha256::digest(bytes))).parse::<oci_spec::image::Digest>()?,
        )
        .size(bytes.len() as u64)
        .build()?)
}

fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex(&Sha256::digest(bytes)))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A tar of `dirs` and `files` (path, bytes, mode), in that order, owned by
/// root, with zero times: the same input gives the same bytes.
fn reproducible_tar(dirs: &[(&str, u32)], files: &[(String, Vec<u8>, u32)]) -> Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    for (path, mode) in dirs {
        let mut header = tar::Header::new_ustar();
        header.set_entry_type(tar::EntryType::Directory);
        header.set_mode(*mode);
        header.set_size(0);
        header.set_mtime(0);
        header.set_uid(0);
        header.set_gid(0);
        builder.append_data(&mut header, path, std::io::empty())?;
    }
    let mut files: Vec<_> = files.iter().collect();
    files.sort_by(|a, b| a.0.cmp(&b.0));
    for (path, bytes, mode) in files {
        let mut header = tar::Header::new_ustar();
        header.set_entry_type(tar::EntryType::Regular);
        header.set_mode(*mode);
        header.set_size(bytes.len() as u64);
        header.set_mtime(0);
        header.set_uid(0);
        header.set_gid(0);
        builder.append_data(&mut header, path, bytes.as_slice())?;
    }
    Ok(builder.into_inner()?)
}

#[cfg(test)]
mod tests {
    use std::io::Read as _;

    use super::*;

    /// The archive's files, by path.
    fn entries(tar_bytes: &[u8]) -> std::collections::BTreeMap<String, (Vec<u8>, u32)> {
        let mut archive = tar::Archive::new(tar_bytes);
        archive
            .entries()
            .unwrap()
            .map(|entry| {
                let mut entry = entry.unwrap();
                let path = entry.path().unwrap().to_string_lossy().into_owned();
                let mode = entry.header().mode().unwrap();
                let mut bytes = Vec::new();
                entry.read_to_end(&mut bytes).unwrap();
                (path, (bytes, mode))
            })
            .collect()
    }

    #[test]
    fn the_image_archive_runs_wasmop_as_its_entrypoint() {
        let archive = archive_path();
        let bytes = std::fs::read(&archive).unwrap_or_else(|e| {
            panic!(
                "{}: {e}; build it with `cargo xtask image` (cargo xtask test does)",
                archive.display()
            )
        });
        let layout = entries(&bytes);
        let blob = |digest: &str| {
            layout[&format!("blobs/sha256/{}", digest.trim_start_matches("sha256:"))]
                .0
                .clone()
        };
        let index: serde_json::Value = serde_json::from_slice(&layout["index.json"].0).unwrap();
        let manifest: serde_json::Value =
            serde_json::from_slice(&blob(index["manifests"][0]["digest"].as_str().unwrap()))
                .unwrap();
        assert_eq!(
            manifest["mediaType"],
            "application/vnd.oci.image.manifest.v1+json"
        );
        let config: serde_json::Value =
            serde_json::from_slice(&blob(manifest["config"]["digest"].as_str().unwrap())).unwrap();
        assert_eq!(
            config["config"]["Entrypoint"],
            serde_json::json!(["/wasmop"])
        );
        assert_eq!(config["config"]["User"], USER);
        // Every blob is what its digest says.
        for (path, (bytes, _)) in layout
            .iter()
            .filter(|(p, _)| p.starts_with("blobs/sha256/") && p.len() > 13)
        {
            assert_eq!(
                path.trim_start_matches("blobs/sha256/"),
                hex(&Sha256::digest(bytes)),
                "{path}"
            );
        }
        let mut layer = Vec::new();
        flate2::read::GzDecoder::new(&blob(manifest["layers"][0]["digest"].as_str().unwrap())[..])
            .read_to_end(&mut layer)
            .unwrap();
        let files = entries(&layer);
        assert!(files.contains_key("modules/cache-operator.wasm"));
        let (binary, mode) = &files["wasmop"];
        assert_eq!(mode & 0o111, 0o111, "not executable");
        // The binary itself runs, statically linked, from the image.
        let dir = tempfile_dir();
        let path = dir.join("wasmop");
        std::fs::write(&path, binary).unwrap();
        {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let out = std::process::Command::new(&path)
            .arg("--version")
            .output()
            .unwrap();
        assert!(out.status.success());
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            format!("wasmop {TAG}")
        );
        let ldd = std::process::Command::new("file").arg(&path).output();
        if let Ok(ldd) = ldd {
            let text = String::from_utf8_lossy(&ldd.stdout);
            assert!(!text.contains("dynamically linked"), "{text}");
        }
        let _ = std::fs::remove_dir_all(dir);
    }

    fn tempfile_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("wasmop-image-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
