//! The webhooks' serving certificate: from a `kubernetes.io/tls` Secret
//! (`--webhook-cert-secret`, e.g. issued by cert-manager), or issued at
//! start by a CA made for this process, whose certificate becomes the
//! webhook configurations' and the CRDs' `caBundle`.

use std::sync::Arc;

use anyhow::Context;
use k8s_openapi::api::core::v1::Secret;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;

/// A serving certificate and the CA the API server trusts it by.
#[derive(Clone, PartialEq, Eq)]
pub struct Certificate {
    /// The certificate chain, PEM.
    pub chain_pem: String,
    /// Its private key, PEM.
    pub key_pem: String,
    /// The CA bundle for `caBundle`, PEM.
    pub ca_pem: String,
}

impl std::fmt::Debug for Certificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Certificate").finish_non_exhaustive()
    }
}

impl Certificate {
    /// A CA made now and a certificate for `host` (a DNS name or an IP
    /// address) signed by it, both valid for ten years. The CA's key is
    /// dropped: nothing else can be signed with it.
    pub fn self_issued(host: &str) -> anyhow::Result<Self> {
        use rcgen::{
            BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair,
            KeyUsagePurpose,
        };
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        ca.distinguished_name
            .push(DnType::CommonName, "wasmop webhook CA");
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let (start, end) = validity();
        ca.not_before = start;
        ca.not_after = end;
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate()?)?;
        let mut leaf = CertificateParams::new(vec![host.to_owned()])
            .with_context(|| format!("--webhook-host {host:?} is not a DNS name or IP address"))?;
        leaf.distinguished_name.push(DnType::CommonName, host);
        leaf.not_before = start;
        leaf.not_after = end;
        let key = KeyPair::generate()?;
        let cert = leaf.signed_by(&key, &ca)?;
        Ok(Self {
            chain_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            ca_pem: ca.pem(),
        })
    }

    /// The certificate in Secret `namespace/name`: `tls.crt`, `tls.key`,
    /// and `ca.crt` as the bundle (`tls.crt` when it has none). When the
    /// Secret does not exist, the leader creates one issued for `host`, so
    /// that every replica serves the same certificate; a replica that does
    /// not lead waits for it.
    pub async fn from_secret(
        client: kube::Client,
        namespace: &str,
        name: &str,
        host: &str,
    ) -> anyhow::Result<Self> {
        let api = kube::Api::<Secret>::namespaced(client, namespace);
        let read = |e: kube::Error| {
            anyhow::anyhow!("reading --webhook-cert-secret {namespace}/{name}: {e}")
        };
        let mut waited = false;
        let secret = loop {
            if let Some(secret) = api.get_opt(name).await.map_err(read)? {
                break secret;
            }
            let secret = Self::self_issued(host)?.to_secret(name);
            match api.create(&kube::api::PostParams::default(), &secret).await {
                Ok(created) => {
                    tracing::info!(secret = %format!("{namespace}/{name}"), %host, "issued the webhook certificate into its Secret");
                    break created;
                }
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) if fenced(&e) => {
                    if !waited {
                        tracing::info!(secret = %format!("{namespace}/{name}"), "waiting for the leader to create the webhook certificate's Secret");
                        waited = true;
                    }
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                }
                Err(e) => {
                    anyhow::bail!("creating --webhook-cert-secret {namespace}/{name}: {e}")
                }
            }
        };
        let data = secret.data.unwrap_or_default();
        let text = |key: &str| -> anyhow::Result<Option<String>> {
            data.get(key)
                .map(|v| {
                    String::from_utf8(v.0.clone())
                        .with_context(|| format!("{namespace}/{name}: {key} is not PEM text"))
                })
                .transpose()
        };
        let chain_pem =
            text("tls.crt")?.with_context(|| format!("{namespace}/{name} has no tls.crt"))?;
        let key_pem =
            text("tls.key")?.with_context(|| format!("{namespace}/{name} has no tls.key"))?;
        let ca_pem = text("ca.crt")?.unwrap_or_else(|| chain_pem.clone());
        Ok(Self {
            chain_pem,
            key_pem,
            ca_pem,
        })
    }

    /// A `kubernetes.io/tls` Secret `name` holding this certificate.
    fn to_secret(&self, name: &str) -> Secret {
        let bytes = |text: &str| k8s_openapi::ByteString(text.as_bytes().to_vec());
        Secret {
            metadata: kube::api::ObjectMeta {
                name: Some(name.to_owned()),
                labels: Some(
                    [(
                        "app.kubernetes.io/managed-by".to_owned(),
                        "wasmop".to_owned(),
                    )]
                    .into(),
                ),
                ..Default::default()
            },
            type_: Some("kubernetes.io/tls".into()),
            data: Some(
                [
                    ("tls.crt".to_owned(), bytes(&self.chain_pem)),
                    ("tls.key".to_owned(), bytes(&self.key_pem)),
                    ("ca.crt".to_owned(), bytes(&self.ca_pem)),
                ]
                .into(),
            ),
            ..Default::default()
        }
    }

    /// The certificate as rustls serves it.
    pub fn certified_key(&self) -> anyhow::Result<Arc<CertifiedKey>> {
        let chain = CertificateDer::pem_slice_iter(self.chain_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .context("the webhook certificate is not PEM")?;
        anyhow::ensure!(!chain.is_empty(), "the webhook certificate chain is empty");
        let key = PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes())
            .context("the webhook key is not a PEM private key")?;
        let key = rustls::crypto::ring::sign::any_supported_type(&key)
            .context("the webhook key is of a type rustls does not sign with")?;
        let certified = CertifiedKey::new(chain, key);
        certified
            .keys_match()
            .context("the webhook certificate does not match its key")?;
        Ok(Arc::new(certified))
    }

    /// A rustls server configuration serving this certificate over
    /// HTTP/1.1 (see [`Resolver`] to replace it while serving).
    pub fn server_config(&self) -> anyhow::Result<Arc<rustls::ServerConfig>> {
        Resolver::new(self.certified_key()?).server_config()
    }
}

/// Whether a write was refused because this host does not lead.
fn fenced(error: &kube::Error) -> bool {
    format!("{error}").contains("not the leader")
}

/// The certificate rustls serves, replaceable while it serves (a renewed
/// Secret).
#[derive(Debug)]
pub struct Resolver(std::sync::RwLock<Arc<CertifiedKey>>);

impl Resolver {
    /// Serves `key`.
    pub fn new(key: Arc<CertifiedKey>) -> Arc<Self> {
        Arc::new(Self(std::sync::RwLock::new(key)))
    }

    /// Serves `key` from the next handshake on.
    pub fn replace(&self, key: Arc<CertifiedKey>) {
        *self.0.write().expect("resolver lock") = key;
    }

    /// A server configuration over HTTP/1.1 that asks this resolver.
    pub fn server_config(self: &Arc<Self>) -> anyhow::Result<Arc<rustls::ServerConfig>> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

impl rustls::server::ResolvesServerCert for Resolver {
    fn resolve(&self, _hello: rustls::server::ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.read().expect("resolver lock").clone())
    }
}

/// From a day ago (clock skew) to ten years on.
fn validity() -> (time::OffsetDateTime, time::OffsetDateTime) {
    let now = time::OffsetDateTime::now_utc();
    (
        now - time::Duration::days(1),
        now + time::Duration::days(3650),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_self_issued_certificate_serves_and_names_its_host() {
        for host in ["127.0.0.1", "wasmop-webhook.wasmop-system.svc"] {
            let cert = Certificate::self_issued(host).unwrap();
            assert!(cert.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
            assert_ne!(cert.ca_pem, cert.chain_pem);
            cert.server_config().unwrap();
        }
    }
}
