//! The signature objects cosign writes, checked against a module: the
//! bundles of `cosign sign-blob --bundle`, the DSSE envelope of a Sigstore
//! bundle attached to an OCI artifact, and the simple-signing payload of a
//! `.sig` manifest. Each check is pure: bytes in, the signer's fingerprint
//! or why not out.
//!
//! Bundle formats accepted for `url`, `file` and `configMap` modules:
//! - the Sigstore bundle (`application/vnd.dev.sigstore.bundle…`, v0.1 to
//!   v0.3, cosign 3's default) with a `messageSignature`;
//! - cosign's own bundle (`base64Signature`, with `cert` and `rekorBundle`
//!   when keyless; cosign 2's, and cosign 3's with
//!   `--new-bundle-format=false`).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::{Deserialize, Serialize};

use super::{Error, Keys};

/// The media type prefix of Sigstore bundles (v0.1 and v0.2 as
/// `application/vnd.dev.sigstore.bundle+json;version=0.x`, v0.3 as
/// `application/vnd.dev.sigstore.bundle.v0.3+json`).
const SIGSTORE_BUNDLE: &str = "application/vnd.dev.sigstore.bundle";

/// The artifact type and layer media type of a Sigstore bundle attached to
/// an OCI artifact (cosign 3).
pub const BUNDLE_V03_MEDIA_TYPE: &str = "application/vnd.dev.sigstore.bundle.v0.3+json";

/// The payload type of the in-toto statement an attached bundle signs.
pub const IN_TOTO_PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";

/// The predicate type of cosign's image signature statement.
pub const COSIGN_SIGN_PREDICATE: &str = "https://sigstore.dev/cosign/sign/v1";

const IN_TOTO_STATEMENT_V1: &str = "https://in-toto.io/Statement/v1";
const IN_TOTO_STATEMENT_V01: &str = "https://in-toto.io/Statement/v0.1";

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Bundle {
    #[serde(default)]
    media_type: Option<String>,
    #[serde(default)]
    message_signature: Option<MessageSignature>,
    #[serde(default)]
    dsse_envelope: Option<Envelope>,
    /// cosign's own bundle.
    #[serde(default)]
    base64_signature: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MessageSignature {
    #[serde(default)]
    message_digest: Option<MessageDigest>,
    signature: String,
}

#[derive(Deserialize)]
struct MessageDigest {
    algorithm: String,
    digest: String,
}

/// A DSSE envelope.
#[derive(Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Envelope {
    /// The signed payload, base64.
    pub payload: String,
    /// What the payload is.
    pub payload_type: String,
    /// Its signatures.
    pub signatures: Vec<EnvelopeSignature>,
}

/// One signature of a DSSE envelope.
#[derive(Deserialize, Serialize)]
pub struct EnvelopeSignature {
    /// The signature, base64.
    pub sig: String,
    /// Which key, when said.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub keyid: String,
}

fn parse(bytes: &[u8]) -> Result<Bundle, Error> {
    serde_json::from_slice(bytes).map_err(|e| Error::Malformed(format!("not a bundle: {e}")))
}

fn decode(what: &str, text: &str) -> Result<Vec<u8>, Error> {
    BASE64
        .decode(text.trim())
        .map_err(|e| Error::Malformed(format!("{what} is not base64: {e}")))
}

/// Checks the bundle `bytes` of `cosign sign-blob --bundle` against
/// `module`, whose SHA-256 is `digest` (hex): the signer's fingerprint.
pub fn verify_blob(
    bytes: &[u8],
    module: &[u8],
    digest: &str,
    keys: &Keys,
) -> Result<String, Error> {
    let bundle = parse(bytes)?;
    if let Some(media_type) = bundle
        .media_type
        .as_deref()
        .filter(|t| t.starts_with(SIGSTORE_BUNDLE))
    {
        let Some(signed) = bundle.message_signature else {
            return Err(Error::Malformed(if bundle.dsse_envelope.is_some() {
                format!(
                    "the {media_type} bundle holds a DSSE envelope, an attestation (cosign attest-blob), not a signature of the module (cosign sign-blob)"
                )
            } else {
                format!("the {media_type} bundle has no messageSignature")
            }));
        };
        if let Some(named) = signed.message_digest {
            if named.algorithm != "SHA2_256" {
                return Err(Error::Malformed(format!(
                    "the bundle's message digest is {}, expected SHA2_256",
                    named.algorithm
                )));
            }
            let named = hex::encode(decode("the message digest", &named.digest)?);
            if named != digest.to_ascii_lowercase() {
                return Err(Error::Digest(format!(
                    "the bundle signs sha256 {}…, the module is sha256 {}…",
                    short(&named),
                    short(digest)
                )));
            }
        }
        let signature = decode("the signature", &signed.signature)?;
        return keys.verify(&signature, module, "the module");
    }
    if let Some(signature) = bundle.base64_signature {
        let signature = decode("base64Signature", &signature)?;
        return keys
            .verify(&signature, module, "the module")
            .map_err(|e| match e {
                // cosign's own bundle names no digest: a signature of another
                // module looks like another key's.
                Error::WrongKey(why) => Error::WrongKey(format!(
                    "{why}, or the bundle signs another module than sha256 {}…",
                    short(digest)
                )),
                other => other,
            });
    }
    Err(Error::Malformed(
        "neither a Sigstore bundle (mediaType application/vnd.dev.sigstore.bundle…) nor cosign's bundle (base64Signature)".into(),
    ))
}

/// The DSSE pre-authentication encoding: what an envelope's signatures
/// sign.
pub fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "DSSEv1 {} {payload_type} {} ",
        payload_type.len(),
        payload.len()
    )
    .into_bytes();
    out.extend_from_slice(payload);
    out
}

#[derive(Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct Statement {
    #[serde(rename = "_type")]
    type_: String,
    subject: Vec<Subject>,
    predicate_type: String,
    #[serde(default)]
    predicate: serde_json::Value,
}

#[derive(Deserialize, Serialize)]
struct Subject {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    digest: std::collections::BTreeMap<String, String>,
}

/// The in-toto statement cosign 3 signs for an OCI artifact whose manifest
/// digest is `sha256:<hex>`, as the bytes of a DSSE payload.
pub fn image_statement(manifest_digest: &str) -> Vec<u8> {
    let hex = manifest_digest.trim_start_matches("sha256:");
    serde_json::to_vec(&Statement {
        type_: IN_TOTO_STATEMENT_V1.into(),
        subject: vec![Subject {
            name: None,
            digest: [("sha256".to_owned(), hex.to_owned())].into(),
        }],
        predicate_type: COSIGN_SIGN_PREDICATE.into(),
        predicate: serde_json::json!({}),
    })
    .expect("a statement serialises")
}

/// Checks a Sigstore bundle attached to an OCI artifact (its DSSE envelope
/// signs an in-toto statement) against the artifact's manifest digest
/// `sha256:<hex>`: the signer's fingerprint.
pub fn verify_attached(bytes: &[u8], manifest_digest: &str, keys: &Keys) -> Result<String, Error> {
    let bundle = parse(bytes)?;
    let Some(envelope) = bundle.dsse_envelope else {
        return Err(Error::Malformed(
            "the attached bundle has no DSSE envelope".into(),
        ));
    };
    if envelope.payload_type != IN_TOTO_PAYLOAD_TYPE {
        return Err(Error::Malformed(format!(
            "the envelope's payload is {:?}, expected {IN_TOTO_PAYLOAD_TYPE}",
            envelope.payload_type
        )));
    }
    let payload = decode("the envelope's payload", &envelope.payload)?;
    let signed = pae(&envelope.payload_type, &payload);
    let mut signer = None;
    for signature in envelope.signatures.iter().take(super::MAX_SIGNATURES) {
        let signature = decode("the envelope's signature", &signature.sig)?;
        if let Some(found) = keys.signer(&signature, &signed) {
            signer = Some(found);
            break;
        }
    }
    let Some(signer) = signer else {
        return Err(Error::WrongKey(format!(
            "the attached bundle is signed by none of the keys {}",
            keys.fingerprints()
        )));
    };
    let statement: Statement = serde_json::from_slice(&payload)
        .map_err(|e| Error::Malformed(format!("the envelope's payload is not a statement: {e}")))?;
    if statement.type_ != IN_TOTO_STATEMENT_V1 && statement.type_ != IN_TOTO_STATEMENT_V01 {
        return Err(Error::Malformed(format!(
            "the payload is a {:?}, not an in-toto statement",
            statement.type_
        )));
    }
    if statement.predicate_type != COSIGN_SIGN_PREDICATE {
        return Err(Error::Malformed(format!(
            "the statement's predicate is {:?}, an attestation, not cosign's signature ({COSIGN_SIGN_PREDICATE})",
            statement.predicate_type
        )));
    }
    let hex = manifest_digest.trim_start_matches("sha256:");
    if !statement.subject.iter().any(|s| {
        s.digest
            .get("sha256")
            .is_some_and(|d| d.eq_ignore_ascii_case(hex))
    }) {
        let named: Vec<String> = statement
            .subject
            .iter()
            .filter_map(|s| s.digest.get("sha256"))
            .map(|d| format!("sha256 {}…", short(d)))
            .collect();
        return Err(Error::Digest(format!(
            "the signature is for {}, the module's manifest is sha256 {}…",
            if named.is_empty() {
                "no sha256 digest".to_owned()
            } else {
                named.join(", ")
            },
            short(hex)
        )));
    }
    Ok(signer)
}

/// A Sigstore bundle v0.3 of `envelope`, as cosign 3 attaches it.
pub fn attached_bundle(envelope: Envelope, key_hint: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "mediaType": BUNDLE_V03_MEDIA_TYPE,
        "verificationMaterial": {"publicKey": {"hint": key_hint}},
        "dsseEnvelope": envelope,
    }))
    .expect("a bundle serialises")
}

#[derive(Deserialize)]
struct SimpleSigning {
    critical: Critical,
}

#[derive(Deserialize)]
struct Critical {
    identity: Identity,
    image: Image,
}

#[derive(Deserialize)]
struct Identity {
    #[serde(rename = "docker-reference")]
    docker_reference: String,
}

#[derive(Deserialize)]
struct Image {
    #[serde(rename = "docker-manifest-digest")]
    docker_manifest_digest: String,
}

/// Checks the simple-signing `payload` of a `.sig` manifest's layer and its
/// `signature` (base64, the layer's annotation) against the artifact's
/// manifest digest and its repository (`<registry>/<repository>`; the
/// registry may differ, as a mirror's does): the signer's fingerprint.
pub fn verify_simple_signing(
    payload: &[u8],
    signature: &str,
    manifest_digest: &str,
    repository: &str,
    keys: &Keys,
) -> Result<String, Error> {
    let signature = decode("the signature annotation", signature)?;
    let signer = keys.verify(&signature, payload, "the simple-signing payload")?;
    let signed: SimpleSigning = serde_json::from_slice(payload)
        .map_err(|e| Error::Malformed(format!("not a simple-signing payload: {e}")))?;
    if !signed
        .critical
        .image
        .docker_manifest_digest
        .eq_ignore_ascii_case(manifest_digest)
    {
        return Err(Error::Digest(format!(
            "the signature is for {}, the module's manifest is {manifest_digest}",
            signed.critical.image.docker_manifest_digest
        )));
    }
    let named = signed.critical.identity.docker_reference;
    if path_of(&named) != path_of(repository) {
        return Err(Error::Digest(format!(
            "the signature names the repository {named:?}, the module is in {repository:?}"
        )));
    }
    Ok(signer)
}

/// The repository path of `<registry>/<path>[:tag|@digest]`.
fn path_of(reference: &str) -> &str {
    let reference = reference.split('@').next().unwrap_or_default();
    let path = reference.split_once('/').map_or(reference, |(_, p)| p);
    match path.rsplit_once(':') {
        Some((before, tag)) if !tag.contains('/') => before,
        _ => path,
    }
}

/// The first 12 hex digits of a digest, with or without `sha256:`.
pub(super) fn short(hex: &str) -> &str {
    let hex = hex.trim_start_matches("sha256:");
    &hex[..hex.len().min(12)]
}

#[cfg(test)]
mod tests {
    use super::super::tests::key;
    use super::*;
    use crate::runtime::cache::digest as sha256;

    fn sigstore_bundle(module: &[u8], signature: &[u8]) -> Vec<u8> {
        use sha2::Digest as _;
        serde_json::to_vec(&serde_json::json!({
            "mediaType": BUNDLE_V03_MEDIA_TYPE,
            "verificationMaterial": {"publicKey": {"hint": "x"}},
            "messageSignature": {
                "messageDigest": {"algorithm": "SHA2_256", "digest": BASE64.encode(sha2::Sha256::digest(module))},
                "signature": BASE64.encode(signature),
            },
        }))
        .unwrap()
    }

    #[test]
    fn both_blob_bundle_formats_hold_and_each_failure_says_which() {
        let (signer, pem) = key();
        let (other, other_pem) = key();
        let keys = Keys::parse([pem.as_str()]).unwrap();
        let module = b"\0asm module";
        let digest = sha256(module);
        let signature = signer.sign(module).unwrap();
        let new = sigstore_bundle(module, &signature);
        assert!(verify_blob(&new, module, &digest, &keys).is_ok());
        let old =
            serde_json::to_vec(&serde_json::json!({"base64Signature": BASE64.encode(&signature)}))
                .unwrap();
        assert!(verify_blob(&old, module, &digest, &keys).is_ok());

        let cases: Vec<(Vec<u8>, &[u8], &str)> = vec![
            // A bundle of another module.
            (sigstore_bundle(b"other", &signer.sign(b"other").unwrap()), module, "digest mismatch"),
            (
                serde_json::to_vec(&serde_json::json!({"base64Signature": BASE64.encode(signer.sign(b"other").unwrap())})).unwrap(),
                module,
                "another module",
            ),
            // Another key.
            (sigstore_bundle(module, &other.sign(module).unwrap()), module, "not signed by a trusted key"),
            // Truncated.
            (new[..new.len() / 2].to_vec(), module, "unreadable signature"),
            (b"{}".to_vec(), module, "neither a Sigstore bundle"),
            (
                serde_json::to_vec(&serde_json::json!({"mediaType": BUNDLE_V03_MEDIA_TYPE, "dsseEnvelope": {"payload": "", "payloadType": "x", "signatures": []}})).unwrap(),
                module,
                "an attestation",
            ),
        ];
        for (bundle, module, why) in cases {
            let err = verify_blob(&bundle, module, &sha256(module), &keys).unwrap_err();
            assert!(err.to_string().contains(why), "{why}: {err}");
        }
        let both = Keys::parse([pem.as_str(), other_pem.as_str()]).unwrap();
        assert!(
            verify_blob(
                &sigstore_bundle(module, &other.sign(module).unwrap()),
                module,
                &digest,
                &both
            )
            .is_ok()
        );
    }

    fn envelope(
        signer: &sigstore::crypto::signing_key::SigStoreSigner,
        statement: &[u8],
    ) -> Vec<u8> {
        let signature = signer.sign(&pae(IN_TOTO_PAYLOAD_TYPE, statement)).unwrap();
        attached_bundle(
            Envelope {
                payload: BASE64.encode(statement),
                payload_type: IN_TOTO_PAYLOAD_TYPE.into(),
                signatures: vec![EnvelopeSignature {
                    sig: BASE64.encode(signature),
                    keyid: String::new(),
                }],
            },
            "hint",
        )
    }

    #[test]
    fn an_attached_bundle_holds_for_its_digest_only() {
        let (signer, pem) = key();
        let (other, _) = key();
        let keys = Keys::parse([pem.as_str()]).unwrap();
        let digest = format!("sha256:{}", "ab".repeat(32));
        let bundle = envelope(&signer, &image_statement(&digest));
        assert!(verify_attached(&bundle, &digest, &keys).is_ok());
        let err =
            verify_attached(&bundle, &format!("sha256:{}", "cd".repeat(32)), &keys).unwrap_err();
        assert!(matches!(err, Error::Digest(_)), "{err}");
        let err = verify_attached(&envelope(&other, &image_statement(&digest)), &digest, &keys)
            .unwrap_err();
        assert!(matches!(err, Error::WrongKey(_)), "{err}");
        let attestation = serde_json::to_vec(&serde_json::json!({
            "_type": IN_TOTO_STATEMENT_V1,
            "subject": [{"digest": {"sha256": "ab".repeat(32)}}],
            "predicateType": "https://slsa.dev/provenance/v1",
            "predicate": {},
        }))
        .unwrap();
        let err = verify_attached(&envelope(&signer, &attestation), &digest, &keys).unwrap_err();
        assert!(err.to_string().contains("an attestation"), "{err}");
    }

    #[test]
    fn a_simple_signing_payload_holds_for_its_digest_and_repository() {
        let (signer, pem) = key();
        let keys = Keys::parse([pem.as_str()]).unwrap();
        let digest = format!("sha256:{}", "ab".repeat(32));
        let payload = |reference: &str, digest: &str| {
            serde_json::to_vec(&serde_json::json!({
                "critical": {
                    "identity": {"docker-reference": reference},
                    "image": {"docker-manifest-digest": digest},
                    "type": "cosign container image signature",
                },
                "optional": null,
            }))
            .unwrap()
        };
        let check = |payload: &[u8], repository: &str| {
            let signature = BASE64.encode(signer.sign(payload).unwrap());
            verify_simple_signing(payload, &signature, &digest, repository, &keys)
        };
        assert!(check(&payload("r.io/ops/cache", &digest), "r.io/ops/cache").is_ok());
        assert!(
            check(
                &payload("mirror.io:5000/ops/cache:v1", &digest),
                "r.io/ops/cache"
            )
            .is_ok()
        );
        let err = check(&payload("r.io/ops/other", &digest), "r.io/ops/cache").unwrap_err();
        assert!(err.to_string().contains("names the repository"), "{err}");
        let err = check(
            &payload("r.io/ops/cache", &format!("sha256:{}", "cd".repeat(32))),
            "r.io/ops/cache",
        )
        .unwrap_err();
        assert!(matches!(err, Error::Digest(_)), "{err}");
        let signed = payload("r.io/ops/cache", &digest);
        let forged = BASE64.encode(signer.sign(b"something else").unwrap());
        let err =
            verify_simple_signing(&signed, &forged, &digest, "r.io/ops/cache", &keys).unwrap_err();
        assert!(matches!(err, Error::WrongKey(_)), "{err}");
    }

    #[test]
    fn pae_is_dsse_v1() {
        assert_eq!(pae("t", b"abc"), b"DSSEv1 1 t 3 abc");
    }
}
