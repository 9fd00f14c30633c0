//! A guest's kinds among the others': one guest per primary kind in this
//! host, claims on the kind's CRD across hosts, and the webhook a converted
//! kind needs.

use super::{Error, GuestSpec, Host, Origin};
use crate::runtime::Guest;

impl Host {
    /// Refuses `guest`'s primary kind when another guest manages it.
    pub(super) fn check_kind_free(&self, name: &str, guest: &Guest) -> Result<(), Error> {
        let primary = &guest.description().primary;
        if let Some((other, _)) = self.guests.iter().find(|(n, r)| {
            **n != name
                && r.slot
                    .current()
                    .description()
                    .primary
                    .same_resource(primary)
        }) {
            return Err(Error::KindTaken {
                kind: primary.to_string(),
                other: other.clone(),
            });
        }
        Ok(())
    }

    /// Refuses a guest whose primary kind another list's guest claims
    /// where it would watch; records the claim of a listed guest.
    pub(super) async fn claim_kind(
        &self,
        spec: &GuestSpec,
        kinds: &crate::controller::ResolvedKinds,
    ) -> Result<(), Error> {
        let primary = &kinds.primary;
        let Some(crd) = crd_of(&primary.resource) else {
            return Ok(());
        };
        let everywhere: [String; 0] = [];
        let claim = crate::claims::Claim {
            crd,
            namespaces: if primary.namespaced {
                &spec.controller.namespaces
            } else {
                &everywhere
            },
            holder: self
                .list
                .as_ref()
                .filter(|_| spec.origin == Origin::List)
                .map(|list| format!("{list}/{}", spec.name)),
        };
        // The claim is the same whichever replica of this list writes it,
        // so standbys write it too (through the unfenced client).
        Ok(crate::claims::claim(&self.clients.unfenced_host(), &claim).await?)
    }

    /// Refuses a guest whose conversion the API server would call at a
    /// webhook nobody serves.
    pub(super) fn check_webhooks(
        &self,
        name: &str,
        guest: &Guest,
        kinds: &crate::controller::ResolvedKinds,
    ) -> Result<(), Error> {
        if self.webhooks.is_none() && guest.converts() && kinds.converted_by_webhook {
            return Err(Error::WebhookNeeded {
                guest: name.to_owned(),
                kind: kinds.primary.kind.to_string(),
            });
        }
        Ok(())
    }

    /// Releases, in the background, the claim guest `name` of the list had
    /// on `crd` (logged if it fails: the claim then stays, as after a crash).
    pub(super) fn release_claim(&self, name: &str, crd: Option<String>) {
        let (Some(list), Some(crd)) = (&self.list, crd) else {
            return;
        };
        let holder = format!("{list}/{name}");
        let client = self.clients.unfenced_host();
        tokio::spawn(async move {
            if let Err(e) = crate::claims::release(&client, &crd, &holder).await {
                tracing::warn!(%holder, "could not release the claim: {e}");
            }
        });
    }
}

/// The CRD of a primary kind's resource; none for a built-in kind.
pub(super) fn crd_of(resource: &kube::core::ApiResource) -> Option<String> {
    (!resource.group.is_empty()).then(|| format!("{}.{}", resource.plural, resource.group))
}
