//! Signatures beside an OCI artifact, as cosign stores them: found and
//! checked for a module's manifest digest, and written for `wasmop push
//! --sign-key` the way cosign 3 writes them (so `cosign verify` accepts
//! them).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use oci_client::Reference;
use oci_client::manifest::{ImageIndexEntry, OciDescriptor, OciImageIndex, OciImageManifest};
use sigstore::crypto::signing_key::SigStoreSigner;

use super::bundle::{
    self, BUNDLE_V03_MEDIA_TYPE, COSIGN_SIGN_PREDICATE, IN_TOTO_PAYLOAD_TYPE, short,
};
use super::{Error, Keys, MAX_BUNDLE_BYTES, MAX_SIGNATURES};
use crate::runtime::cache::digest as digest_of;
use crate::source::oci::{self, MANIFEST_MEDIA_TYPE, Registry};

/// The layer media type of a `.sig` manifest (cosign 2).
pub const SIMPLE_SIGNING_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The layer annotation holding a `.sig` layer's signature.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// The empty config of an artifact manifest.
const EMPTY_MEDIA_TYPE: &str = "application/vnd.oci.empty.v1+json";
const INDEX_MEDIA_TYPE: &str = "application/vnd.oci.image.index.v1+json";
/// The largest referrer manifest looked at: cosign's are under 1 KiB.
const MAX_MANIFEST_BYTES: i64 = 64 << 10;

fn fetch(e: oci::Error) -> Error {
    Error::Fetch(e.to_string())
}

/// The tag of the referrers' fallback index, and of cosign 2's
/// signatures (with `.sig`), for a manifest `digest`.
fn digest_tag(digest: &str) -> String {
    digest.replace(':', "-")
}

/// Checks the signatures stored beside the artifact `reference` whose
/// manifest digest is `digest`: the fingerprint of the key of the first
/// that holds, or why none does.
pub async fn verify(
    registry: &Registry,
    reference: &Reference,
    digest: &str,
    keys: &Keys,
) -> Result<String, Error> {
    let subject = Reference::with_digest(
        reference.registry().to_owned(),
        reference.repository().to_owned(),
        digest.to_owned(),
    );
    let repository = format!("{}/{}", reference.registry(), reference.repository());
    let mut refused = Vec::new();
    // A registry may answer the referrers' fallback tag with something
    // else than an index (`cosign copy` tags the artifact itself so): the
    // `.sig` tag is still looked at.
    match registry.referrers(&subject, BUNDLE_V03_MEDIA_TYPE).await {
        Ok(index) => {
            for entry in index.manifests.iter().take(MAX_SIGNATURES) {
                match attached(registry, &subject, entry, digest, keys).await {
                    Ok(signer) => return Ok(signer),
                    Err(e) => refused.push(e),
                }
            }
        }
        Err(e) => refused.push(fetch(e)),
    }
    let sig = Reference::with_tag(
        reference.registry().to_owned(),
        reference.repository().to_owned(),
        format!("{}.sig", digest_tag(digest)),
    );
    if let Some(manifest) = registry.image_manifest(&sig).await.map_err(fetch)? {
        let layers = manifest
            .layers
            .iter()
            .filter(|l| l.media_type == SIMPLE_SIGNING_MEDIA_TYPE)
            .take(MAX_SIGNATURES);
        for layer in layers {
            match simple(registry, &sig, layer, digest, &repository, keys).await {
                Ok(signer) => return Ok(signer),
                Err(e) => refused.push(e),
            }
        }
    }
    // What a signature object said about the module tells more than a
    // failure to read one.
    refused.sort_by_key(|e| match e {
        Error::Digest(_) | Error::WrongKey(_) => 0,
        Error::Malformed(_) => 1,
        Error::Missing(_) | Error::NoKeys(_) => 2,
        Error::Fetch(_) => 3,
    });
    let more = refused.len().saturating_sub(1);
    match refused.into_iter().next() {
        Some(first) if more == 0 => Err(first),
        Some(first) => Err(with_note(
            first,
            &format!(" ({more} more signature objects refused)"),
        )),
        None => Err(Error::Missing(format!(
            "nothing beside {repository}@{digest}: no referrer of type {BUNDLE_V03_MEDIA_TYPE} (cosign sign) and no tag {}.sig (cosign sign --new-bundle-format=false)",
            digest_tag(digest)
        ))),
    }
}

fn with_note(error: Error, note: &str) -> Error {
    match error {
        Error::Missing(m) => Error::Missing(m + note),
        Error::WrongKey(m) => Error::WrongKey(m + note),
        Error::Digest(m) => Error::Digest(m + note),
        Error::Malformed(m) => Error::Malformed(m + note),
        Error::Fetch(m) => Error::Fetch(m + note),
        Error::NoKeys(m) => Error::NoKeys(m + note),
    }
}

/// A Sigstore bundle attached as a referrer of `subject`.
async fn attached(
    registry: &Registry,
    subject: &Reference,
    entry: &ImageIndexEntry,
    digest: &str,
    keys: &Keys,
) -> Result<String, Error> {
    if !(0..=MAX_MANIFEST_BYTES).contains(&entry.size) {
        return Err(Error::Malformed(format!(
            "the referrer {} is {} bytes, more than a signature's manifest takes",
            entry.digest, entry.size
        )));
    }
    let pinned = Reference::with_digest(
        subject.registry().to_owned(),
        subject.repository().to_owned(),
        entry.digest.clone(),
    );
    let manifest = registry
        .image_manifest(&pinned)
        .await
        .map_err(fetch)?
        .ok_or_else(|| {
            Error::Missing(format!(
                "the referrer {} is listed but not stored",
                entry.digest
            ))
        })?;
    let named = manifest
        .subject
        .as_ref()
        .map(|s| s.digest.as_str())
        .unwrap_or("nothing");
    if !named.eq_ignore_ascii_case(digest) {
        return Err(Error::Digest(format!(
            "the signature object {}… is for {named}, not the module's manifest {}…",
            short(&entry.digest),
            short(digest)
        )));
    }
    let layer = manifest
        .layers
        .iter()
        .find(|l| l.media_type == BUNDLE_V03_MEDIA_TYPE)
        .ok_or_else(|| {
            Error::Malformed(format!("the referrer {} holds no bundle", entry.digest))
        })?;
    let bytes = small_blob(registry, &pinned, layer).await?;
    bundle::verify_attached(&bytes, digest, keys)
}

/// One simple-signing layer of a `.sig` manifest.
async fn simple(
    registry: &Registry,
    sig: &Reference,
    layer: &OciDescriptor,
    digest: &str,
    repository: &str,
    keys: &Keys,
) -> Result<String, Error> {
    let signature = layer
        .annotations
        .as_ref()
        .and_then(|a| a.get(SIGNATURE_ANNOTATION))
        .ok_or_else(|| {
            Error::Malformed(format!(
                "the layer {} of {} has no {SIGNATURE_ANNOTATION} annotation",
                layer.digest,
                sig.whole()
            ))
        })?;
    let payload = small_blob(registry, sig, layer).await?;
    bundle::verify_simple_signing(&payload, signature, digest, repository, keys)
}

/// A signature object's blob, at most [`MAX_BUNDLE_BYTES`], checked
/// against its digest.
async fn small_blob(
    registry: &Registry,
    reference: &Reference,
    layer: &OciDescriptor,
) -> Result<Vec<u8>, Error> {
    if !(0..=MAX_BUNDLE_BYTES as i64).contains(&layer.size) {
        return Err(Error::Malformed(format!(
            "the signature object {} is {} bytes, more than the {} KiB a signature may take",
            layer.digest,
            layer.size,
            MAX_BUNDLE_BYTES >> 10
        )));
    }
    let bytes = registry
        .blob(reference, layer, MAX_BUNDLE_BYTES)
        .await
        .map_err(fetch)?;
    let actual = format!("sha256:{}", digest_of(&bytes));
    if !actual.eq_ignore_ascii_case(&layer.digest) {
        return Err(Error::Malformed(format!(
            "the blob {} holds bytes of {actual}",
            layer.digest
        )));
    }
    Ok(bytes)
}

/// Signs the artifact `reference` whose manifest digest is `digest` with
/// `signer` (whose public key is `public_der`) as cosign 3 does: a
/// Sigstore bundle whose DSSE envelope signs an in-toto statement of the
/// digest, attached as a referrer (and listed in the referrers' tag
/// fallback `sha256-<hex>`, for registries without the referrers API).
/// Returns the digest of the signature's manifest.
pub async fn sign(
    registry: &Registry,
    reference: &Reference,
    digest: &str,
    signer: &SigStoreSigner,
    public_der: &[u8],
) -> anyhow::Result<String> {
    use anyhow::Context as _;
    let at = |what: String| {
        Reference::with_digest(
            reference.registry().to_owned(),
            reference.repository().to_owned(),
            what,
        )
    };
    let subject_manifest = registry
        .raw_manifest(&at(digest.to_owned()), &[MANIFEST_MEDIA_TYPE])
        .await?
        .with_context(|| format!("{}@{digest} is not in the registry", reference.whole()))?;
    let statement = bundle::image_statement(digest);
    let signature = signer
        .sign(&bundle::pae(IN_TOTO_PAYLOAD_TYPE, &statement))
        .map_err(|e| anyhow::anyhow!("signing: {e}"))?;
    let hint = {
        use sha2::Digest as _;
        BASE64.encode(sha2::Sha256::digest(public_der))
    };
    let bundle_bytes = bundle::attached_bundle(
        bundle::Envelope {
            payload: BASE64.encode(&statement),
            payload_type: IN_TOTO_PAYLOAD_TYPE.into(),
            signatures: vec![bundle::EnvelopeSignature {
                sig: BASE64.encode(signature),
                keyid: String::new(),
            }],
        },
        &hint,
    );
    let empty = b"{}".to_vec();
    let empty_digest = format!("sha256:{}", digest_of(&empty));
    let bundle_digest = format!("sha256:{}", digest_of(&bundle_bytes));
    let layer = OciDescriptor {
        media_type: BUNDLE_V03_MEDIA_TYPE.into(),
        digest: bundle_digest.clone(),
        size: bundle_bytes.len() as i64,
        ..OciDescriptor::default()
    };
    registry.push_blob(reference, empty, &empty_digest).await?;
    registry
        .push_blob(reference, bundle_bytes, &bundle_digest)
        .await?;
    let annotations: std::collections::BTreeMap<String, String> = [
        (
            "dev.sigstore.bundle.content".to_owned(),
            "dsse-envelope".to_owned(),
        ),
        (
            "dev.sigstore.bundle.predicateType".to_owned(),
            COSIGN_SIGN_PREDICATE.to_owned(),
        ),
    ]
    .into();
    let manifest = OciImageManifest {
        schema_version: 2,
        media_type: Some(MANIFEST_MEDIA_TYPE.into()),
        config: OciDescriptor {
            media_type: EMPTY_MEDIA_TYPE.into(),
            digest: empty_digest,
            size: 2,
            ..OciDescriptor::default()
        },
        layers: vec![layer],
        subject: Some(OciDescriptor {
            media_type: MANIFEST_MEDIA_TYPE.into(),
            digest: digest.to_owned(),
            size: subject_manifest.len() as i64,
            ..OciDescriptor::default()
        }),
        artifact_type: Some(BUNDLE_V03_MEDIA_TYPE.into()),
        annotations: Some(annotations.clone()),
    };
    let body = serde_json::to_vec(&manifest)?;
    let manifest_digest = format!("sha256:{}", digest_of(&body));
    let size = body.len() as i64;
    registry
        .push_manifest(&at(manifest_digest.clone()), body, MANIFEST_MEDIA_TYPE)
        .await?;
    // The referrers' tag fallback: the index at `sha256-<hex>`, this
    // signature added to what it lists.
    let fallback = Reference::with_tag(
        reference.registry().to_owned(),
        reference.repository().to_owned(),
        digest_tag(digest),
    );
    let mut index: OciImageIndex = match registry
        .raw_manifest(&fallback, &[INDEX_MEDIA_TYPE])
        .await?
    {
        Some(bytes) => serde_json::from_slice(&bytes)
            .with_context(|| format!("{} is not an image index", fallback.whole()))?,
        None => OciImageIndex {
            schema_version: 2,
            media_type: Some(INDEX_MEDIA_TYPE.into()),
            manifests: Vec::new(),
            artifact_type: None,
            annotations: None,
        },
    };
    if !index.manifests.iter().any(|m| m.digest == manifest_digest) {
        index.manifests.push(ImageIndexEntry {
            media_type: MANIFEST_MEDIA_TYPE.into(),
            digest: manifest_digest.clone(),
            size,
            platform: None,
            annotations: Some(annotations),
            artifact_type: Some(BUNDLE_V03_MEDIA_TYPE.into()),
        });
    }
    registry
        .push_manifest(&fallback, serde_json::to_vec(&index)?, INDEX_MEDIA_TYPE)
        .await?;
    Ok(manifest_digest)
}
