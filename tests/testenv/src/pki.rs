//! The control plane's certificates and kubeconfig files.
//!
//! One certificate authority signs both the API server's serving certificate
//! and every client certificate: kube-apiserver authenticates a client
//! certificate signed by `--client-ca-file` as user = Common Name, groups =
//! Organization values. A single CA keeps the files few; nothing in the tests
//! depends on the two roles being split.

use std::fs;
use std::path::Path;

use anyhow::{Context, Result, bail};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// A PEM certificate with its PEM (PKCS#8) private key.
pub(crate) struct CertPair {
    /// `CERTIFICATE` PEM block.
    pub(crate) cert: String,
    /// `PRIVATE KEY` PEM block.
    pub(crate) key: String,
}

/// The certificate authority of one control plane.
pub(crate) struct Pki {
    ca_cert: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Pki {
    /// Makes a fresh CA (ECDSA P-256, like everything here: fast to generate).
    pub(crate) fn new() -> Result<Self> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::default();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::CommonName, "wasmop-testenv-ca");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key)?;
        Ok(Self {
            ca_cert: cert.pem(),
            issuer: Issuer::new(params, key),
        })
    }

    /// The CA certificate (PEM), for `--client-ca-file`, `--root-ca-file` and
    /// the kubeconfigs.
    pub(crate) fn ca_cert(&self) -> &str {
        &self.ca_cert
    }

    /// The API server's serving certificate, valid for 127.0.0.1 and
    /// localhost (and the in-cluster names, for completeness).
    pub(crate) fn serving_cert(&self) -> Result<CertPair> {
        let mut params = CertificateParams::new(vec![
            "127.0.0.1".to_owned(),
            "localhost".to_owned(),
            "kubernetes".to_owned(),
            "kubernetes.default".to_owned(),
            "kubernetes.default.svc".to_owned(),
        ])?;
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.sign(&params)
    }

    /// A client certificate for `user` in `groups`.
    ///
    /// At most two groups: rcgen keeps one value per attribute type, so the
    /// first group is written as Organization and the second under the same
    /// OID spelled as a custom attribute type. Two cover every identity the
    /// tests need, e.g. a service account's `system:serviceaccounts` and
    /// `system:serviceaccounts:<namespace>`.
    pub(crate) fn client_cert(&self, user: &str, groups: &[&str]) -> Result<CertPair> {
        if user.is_empty() {
            bail!("a client certificate needs a user name");
        }
        if groups.len() > 2 {
            bail!("client certificates carry at most two groups, got {groups:?}");
        }
        let mut params = CertificateParams::default();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, user);
        if let Some(group) = groups.first() {
            params
                .distinguished_name
                .push(DnType::OrganizationName, *group);
        }
        if let Some(group) = groups.get(1) {
            // 2.5.4.10 is id-at-organizationName.
            params
                .distinguished_name
                .push(DnType::CustomDnType(vec![2, 5, 4, 10]), *group);
        }
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.sign(&params)
    }

    fn sign(&self, params: &CertificateParams) -> Result<CertPair> {
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(CertPair {
            cert: cert.pem(),
            key: key.serialize_pem(),
        })
    }
}

/// A key pair for signing service-account tokens: the private key (PEM) for
/// kube-apiserver's `--service-account-signing-key-file` and
/// kube-controller-manager's `--service-account-private-key-file`, the public
/// key (PEM) for `--service-account-key-file`.
pub(crate) fn service_account_keys() -> Result<(String, String)> {
    let key = KeyPair::generate()?;
    Ok((key.serialize_pem(), key.public_key_pem()))
}

/// Writes a self-contained kubeconfig (certificates inline) for one identity.
pub(crate) fn write_kubeconfig(
    path: &Path,
    server: &str,
    ca_cert: &str,
    client: &CertPair,
    user: &str,
) -> Result<()> {
    // serde_json's string quoting is valid YAML double-quoted scalar syntax,
    // so names like `system:serviceaccount:ns:sa` need no further escaping.
    let quote = |value: &str| serde_json::to_string(value).expect("strings serialize");
    let contents = format!(
        "apiVersion: v1\n\
         kind: Config\n\
         clusters:\n\
         - name: wasmop-testenv\n\
         \x20 cluster:\n\
         \x20   server: {server}\n\
         \x20   certificate-authority-data: {ca}\n\
         users:\n\
         - name: {user}\n\
         \x20 user:\n\
         \x20   client-certificate-data: {cert}\n\
         \x20   client-key-data: {key}\n\
         contexts:\n\
         - name: wasmop-testenv\n\
         \x20 context:\n\
         \x20   cluster: wasmop-testenv\n\
         \x20   user: {user}\n\
         current-context: wasmop-testenv\n",
        server = quote(server),
        ca = BASE64.encode(ca_cert),
        user = quote(user),
        cert = BASE64.encode(&client.cert),
        key = BASE64.encode(&client.key),
    );
    fs::write(path, contents).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_cert_refuses_more_than_two_groups() {
        let pki = Pki::new().unwrap();
        assert!(pki.client_cert("alice", &["a", "b"]).is_ok());
        assert!(pki.client_cert("alice", &["a", "b", "c"]).is_err());
    }

    #[test]
    fn kubeconfig_quotes_user_names_with_colons() {
        let dir = tempfile::tempdir().unwrap();
        let pki = Pki::new().unwrap();
        let client = pki.client_cert("system:serviceaccount:ns:sa", &[]).unwrap();
        let path = dir.path().join("kubeconfig");
        write_kubeconfig(
            &path,
            "https://127.0.0.1:6443",
            pki.ca_cert(),
            &client,
            "system:serviceaccount:ns:sa",
        )
        .unwrap();
        let written = fs::read_to_string(&path).unwrap();
        assert!(written.contains("- name: \"system:serviceaccount:ns:sa\""));
        let parsed = kube::config::Kubeconfig::read_from(&path).unwrap();
        assert_eq!(parsed.current_context.as_deref(), Some("wasmop-testenv"));
    }
}
