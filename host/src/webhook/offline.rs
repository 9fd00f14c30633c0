//! `wasmop render --admission` and `--convert`: the guest's admission and
//! conversion offline, with the same sandbox, limits and checks as the
//! webhooks.

use anyhow::{Context, bail};
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse as KubeResponse, AdmissionReview};
use serde::Serialize;
use serde_json::Value;

use super::{admission, conversion};
use crate::runtime::Guest;

/// One admission call's answer as `render` prints it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    /// Admitted or not.
    pub allowed: bool,
    /// A denial's HTTP status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<u16>,
    /// A denial's message.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Warnings for the user.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The JSON Patch the mutating call returned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch: Option<Value>,
}

/// What `render --admission` prints: the defaulting call, the object it
/// leaves, and the validating call on that object (absent when the
/// defaulting call denied).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Admitted {
    /// The mutating webhook's answer.
    pub mutating: Verdict,
    /// The object after its patch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object: Option<Value>,
    /// The validating webhook's answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub validating: Option<Verdict>,
}

/// Runs `review` (an `admission.k8s.io/v1` AdmissionReview with a
/// request) through `guest` as the host's two webhooks would.
pub fn admit(guest: &Guest, review: Value) -> anyhow::Result<Admitted> {
    if !guest.admits() {
        bail!(
            "the module does not export {}",
            wasmop_contract::ADMISSION_INTERFACE
        );
    }
    let review: AdmissionReview<DynamicObject> =
        serde_json::from_value(review).context("not an AdmissionReview")?;
    let mut request: AdmissionRequest<DynamicObject> = review
        .try_into()
        .context("the AdmissionReview has no request")?;
    let response = call(guest, &request, true)?;
    let mutating = verdict(&response)?;
    if !response.allowed {
        return Ok(Admitted {
            mutating,
            object: None,
            validating: None,
        });
    }
    let mut object = request
        .object
        .as_ref()
        .map(serde_json::to_value)
        .transpose()?;
    if let (Some(object), Some(patch)) = (object.as_mut(), &mutating.patch) {
        let patch: json_patch::Patch = serde_json::from_value(patch.clone())?;
        json_patch::patch(object, &patch)?;
        request.object = Some(serde_json::from_value(object.clone())?);
    }
    let response = call(guest, &request, false)?;
    Ok(Admitted {
        mutating,
        object,
        validating: Some(verdict(&response)?),
    })
}

fn call(
    guest: &Guest,
    request: &AdmissionRequest<DynamicObject>,
    mutating: bool,
) -> anyhow::Result<KubeResponse> {
    let review = admission::review(request, mutating, guest.settings());
    let verdict = guest
        .admit(&review)
        .context("no admit")?
        .with_context(|| format!("admit failed ({} call)", phase(mutating)))?;
    let response = admission::answer(
        request,
        verdict,
        mutating,
        admission::PatchBounds::of(guest.limits()),
    )
    .with_context(|| format!("the host refuses the {} verdict", phase(mutating)))?;
    Ok(response)
}

fn phase(mutating: bool) -> &'static str {
    if mutating { "mutating" } else { "validating" }
}

fn verdict(response: &KubeResponse) -> anyhow::Result<Verdict> {
    Ok(Verdict {
        allowed: response.allowed,
        code: (!response.allowed).then_some(response.result.code),
        message: response.result.message.clone(),
        warnings: response.warnings.clone().unwrap_or_default(),
        patch: response
            .patch
            .as_deref()
            .map(serde_json::from_slice)
            .transpose()?,
    })
}

/// The guest's own refusal to convert, with its message.
#[derive(Debug, thiserror::Error)]
#[error("the guest refused to convert: {0}")]
pub struct Refused(pub String);

/// Converts `objects` to `desired_api_version` through `guest`, checked as
/// the conversion webhook checks them.
pub fn convert(
    guest: &Guest,
    objects: &[Value],
    desired_api_version: &str,
) -> anyhow::Result<Vec<Value>> {
    let texts: Vec<String> = objects.iter().map(Value::to_string).collect();
    let converted = guest
        .convert(&texts, desired_api_version)
        .with_context(|| {
            format!(
                "the module does not export {}",
                wasmop_contract::CONVERSION_INTERFACE
            )
        })?
        .context("convert failed")?
        .map_err(Refused)?;
    Ok(conversion::check(objects, converted, desired_api_version)?)
}
