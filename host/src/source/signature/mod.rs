//! Signed modules: a module is compiled only with a valid signature by a
//! key the host trusts for it.
//!
//! A guest-list entry says `verify: {keys: [<PEM public key>, …], bundle:
//! <where the signature is>}` (interface contract), and `wasmop run
//! --require-signed-modules` makes a signature necessary for every entry,
//! with the keys of `--trusted-keys <file>` for an entry that names none.
//! With `--trusted-keys`, an entry's own keys narrow the host's: only those
//! of them the host trusts count, so a writer of the guest list cannot
//! bring a key of its own.
//!
//! Where the signature is, as cosign writes it ([`bundle`] checks one,
//! [`registry`] finds them beside an `oci` artifact and writes them for
//! `wasmop push --sign-key`):
//! - `url`, `file` and `configMap` modules: the bundle `cosign sign-blob
//!   --bundle` writes, named by `verify.bundle` with the forms of `module`.
//! - `oci` modules: the signatures stored beside the artifact, found by its
//!   manifest digest: a Sigstore bundle attached as an OCI referrer (cosign
//!   3's `cosign sign`, through the referrers API or its tag fallback
//!   `sha256-<hex>`) or a `sha256-<hex>.sig` simple-signing manifest
//!   (cosign 2, or 3 with `--new-bundle-format=false`).
//!
//! The keys, their formats and the signature checks are the `sigstore`
//! crate's. Transparency-log entries and certificates in a bundle are not
//! checked: trust is the key.

pub mod bundle;
pub mod registry;

use std::path::Path;

use sigstore::crypto::{CosignVerificationKey, Signature};

/// The most bytes of a bundle or a signature object read: cosign's are a
/// few KiB.
pub const MAX_BUNDLE_BYTES: u64 = 256 << 10;

/// The most signature objects examined beside one artifact.
pub const MAX_SIGNATURES: usize = 16;

/// How long finding and checking an artifact's signatures may take in
/// all: the guest list is followed one entry at a time, and a slow
/// registry must not hold the others.
pub const VERIFY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Why a module's signature does not hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Nothing that could be a signature of it was found.
    #[error("no signature: {0}")]
    Missing(String),
    /// A signature, by none of the keys that count.
    #[error("not signed by a trusted key: {0}")]
    WrongKey(String),
    /// A signature of something else.
    #[error("digest mismatch: {0}")]
    Digest(String),
    /// A signature object that cannot be read.
    #[error("unreadable signature: {0}")]
    Malformed(String),
    /// The signature could not be fetched.
    #[error("cannot fetch the signature: {0}")]
    Fetch(String),
    /// No key counts for the entry.
    #[error("no trusted key: {0}")]
    NoKeys(String),
}

/// Public keys a signature may be made by.
#[derive(Clone, Debug, Default)]
pub struct Keys {
    keys: Vec<Key>,
}

#[derive(Clone, Debug)]
struct Key {
    /// The SubjectPublicKeyInfo, which identifies the key.
    der: Vec<u8>,
    verifier: CosignVerificationKey,
}

impl Key {
    /// The first 12 hex digits of the SHA-256 of the key, for people.
    fn fingerprint(&self) -> String {
        use sha2::Digest as _;
        hex::encode(&sha2::Sha256::digest(&self.der)[..6])
    }
}

impl Keys {
    /// The PEM public keys in `pems` (each text may hold several); a key
    /// that does not parse is refused with its position.
    pub fn parse<'a>(pems: impl IntoIterator<Item = &'a str>) -> Result<Self, String> {
        let mut keys = Vec::new();
        for (i, text) in pems.into_iter().enumerate() {
            let blocks =
                pem::parse_many(text).map_err(|e| format!("key {}: not PEM: {e}", i + 1))?;
            if blocks.is_empty() {
                return Err(format!("key {}: no PEM block", i + 1));
            }
            for block in blocks {
                if block.tag() != "PUBLIC KEY" {
                    return Err(format!(
                        "key {}: a {:?} block, expected a PUBLIC KEY (cosign.pub)",
                        i + 1,
                        block.tag()
                    ));
                }
                let verifier = CosignVerificationKey::try_from_der(block.contents())
                    .map_err(|e| format!("key {}: {e}", i + 1))?;
                keys.push(Key {
                    der: block.contents().to_vec(),
                    verifier,
                });
            }
        }
        Ok(Self { keys })
    }

    /// The keys of the PEM file at `path` (`--trusted-keys`).
    pub fn read(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let keys = Self::parse([text.as_str()]).map_err(|e| format!("{}: {e}", path.display()))?;
        if keys.keys.is_empty() {
            return Err(format!("{}: no public key", path.display()));
        }
        Ok(keys)
    }

    /// Whether there is no key.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The keys of `self` that `trusted` holds too.
    pub fn within(&self, trusted: &Keys) -> Keys {
        Keys {
            keys: self
                .keys
                .iter()
                .filter(|k| trusted.keys.iter().any(|t| t.der == k.der))
                .cloned()
                .collect(),
        }
    }

    /// The fingerprints, for messages.
    pub fn fingerprints(&self) -> String {
        self.keys
            .iter()
            .map(Key::fingerprint)
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The fingerprint of the key that made `signature` over `message`.
    pub fn signer(&self, signature: &[u8], message: &[u8]) -> Option<String> {
        self.keys
            .iter()
            .find(|k| {
                k.verifier
                    .verify_signature(Signature::Raw(signature), message)
                    .is_ok()
            })
            .map(Key::fingerprint)
    }

    /// `signer`, or why none of the keys made the signature.
    fn verify(&self, signature: &[u8], message: &[u8], what: &str) -> Result<String, Error> {
        self.signer(signature, message).ok_or_else(|| {
            Error::WrongKey(format!(
                "{what} is signed by none of the keys {}",
                self.fingerprints()
            ))
        })
    }
}

/// The signer of the private key file at `path` (`wasmop push
/// --sign-key`) and its public key (DER): cosign's encrypted key
/// (`cosign generate-key-pair`, unlocked with `password`, which cosign
/// reads from `COSIGN_PASSWORD`) or an unencrypted PKCS#8 PEM key.
pub fn signer(
    path: &Path,
    password: Option<&[u8]>,
) -> Result<(sigstore::crypto::signing_key::SigStoreSigner, Vec<u8>), String> {
    use sigstore::crypto::SigningScheme;
    use sigstore::crypto::signing_key::SigStoreKeyPair;
    let text = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let pair = if String::from_utf8_lossy(&text).contains("ENCRYPTED SIGSTORE PRIVATE KEY") {
        let password = password.ok_or_else(|| {
            format!(
                "{} is encrypted: set COSIGN_PASSWORD to its password, as for cosign",
                path.display()
            )
        })?;
        SigStoreKeyPair::from_encrypted_pem(&text, password)
    } else {
        SigStoreKeyPair::from_pem(&text)
    }
    .map_err(|e| {
        format!(
            "{}: not a private key cosign signs with: {e}",
            path.display()
        )
    })?;
    let public = pair
        .public_key_to_der()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let signer = [
        SigningScheme::ECDSA_P256_SHA256_ASN1,
        SigningScheme::ECDSA_P384_SHA384_ASN1,
        SigningScheme::ED25519,
    ]
    .iter()
    .find_map(|scheme| pair.to_sigstore_signer(scheme).ok())
    .ok_or_else(|| {
        format!(
            "{}: an ECDSA P-256 or P-384 or an Ed25519 key is needed",
            path.display()
        )
    })?;
    Ok((signer, public))
}

/// What the host trusts: `--require-signed-modules` and `--trusted-keys`.
#[derive(Clone, Debug, Default)]
pub struct Trust {
    /// Every module needs a signature.
    pub require: bool,
    /// The host's own keys.
    pub keys: Option<Keys>,
}

impl Trust {
    /// The keys that count for an entry whose `verify` names `keys` (none:
    /// the entry has no `verify`); none when its module needs no
    /// signature.
    pub fn keys_for(&self, verify: Option<&[String]>) -> Result<Option<Keys>, Error> {
        let own = match verify {
            Some(keys) if !keys.is_empty() => Some(
                Keys::parse(keys.iter().map(String::as_str))
                    .map_err(|e| Error::NoKeys(format!("verify.keys: {e}")))?,
            ),
            _ => None,
        };
        if verify.is_none() && !self.require {
            return Ok(None);
        }
        match (own, &self.keys) {
            (Some(own), Some(host)) => {
                let within = own.within(host);
                if within.is_empty() {
                    return Err(Error::NoKeys(format!(
                        "none of the entry's keys ({}) is among the host's --trusted-keys ({})",
                        own.fingerprints(),
                        host.fingerprints()
                    )));
                }
                Ok(Some(within))
            }
            (Some(own), None) => Ok(Some(own)),
            (None, Some(host)) => Ok(Some(host.clone())),
            (None, None) if verify.is_some() => Err(Error::NoKeys(
                "verify names no keys and the host has no --trusted-keys".into(),
            )),
            (None, None) => Err(Error::NoKeys(
                "the host requires signed modules (--require-signed-modules): the entry needs verify.keys, or the host --trusted-keys"
                    .into(),
            )),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use sigstore::crypto::SigningScheme;
    use sigstore::crypto::signing_key::SigStoreSigner;

    /// A fresh P-256 key: its signer and its PEM public key.
    pub fn key() -> (SigStoreSigner, String) {
        let signer = SigningScheme::ECDSA_P256_SHA256_ASN1
            .create_signer()
            .unwrap();
        let pem = signer
            .to_sigstore_keypair()
            .unwrap()
            .public_key_to_pem()
            .unwrap();
        (signer, pem)
    }

    #[test]
    fn keys_parse_and_bad_ones_are_named() {
        let (signer, pem) = key();
        let keys = Keys::parse([pem.as_str()]).unwrap();
        let signature = signer.sign(b"module").unwrap();
        assert!(keys.signer(&signature, b"module").is_some());
        assert!(keys.signer(&signature, b"other").is_none());
        let err = Keys::parse(["not a key"]).unwrap_err();
        assert!(err.contains("key 1"), "{err}");
        let private = signer
            .to_sigstore_keypair()
            .unwrap()
            .private_key_to_pem()
            .unwrap();
        let err = Keys::parse([pem.as_str(), private.as_str()]).unwrap_err();
        assert!(err.contains("key 2") && err.contains("PUBLIC KEY"), "{err}");
    }

    #[test]
    fn the_entrys_keys_narrow_the_hosts_and_never_widen_them() {
        let (_, a) = key();
        let (_, b) = key();
        let verify =
            |keys: &[&str]| -> Vec<String> { keys.iter().map(|k| (*k).to_owned()).collect() };
        let open = Trust::default();
        assert!(open.keys_for(None).unwrap().is_none());
        assert!(open.keys_for(Some(&verify(&[&a]))).unwrap().is_some());
        let required = Trust {
            require: true,
            keys: None,
        };
        let err = required.keys_for(None).unwrap_err();
        assert!(
            err.to_string().contains("--require-signed-modules"),
            "{err}"
        );
        let host = Trust {
            require: true,
            keys: Some(Keys::parse([a.as_str()]).unwrap()),
        };
        assert_eq!(host.keys_for(None).unwrap().unwrap().keys.len(), 1);
        let both = host.keys_for(Some(&verify(&[&a, &b]))).unwrap().unwrap();
        assert_eq!(both.keys.len(), 1, "only the key the host trusts counts");
        let err = host.keys_for(Some(&verify(&[&b]))).unwrap_err();
        assert!(err.to_string().contains("--trusted-keys"), "{err}");
    }
}
