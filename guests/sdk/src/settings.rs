//! A guest's settings: the guest-list entry's `settings` value, which the
//! host hands to `describe` and to every reconcile as JSON text.
//!
//! One module can serve several configurations under different guest
//! names (as Kubewarden policies do): the settings may even decide which
//! kind it reconciles. `describe` checks them once per loaded version; an
//! error there refuses the version with `InvalidSettings`.

use serde::de::DeserializeOwned;

/// The settings as the host sent them: JSON text, or none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    text: Option<String>,
}

impl Settings {
    /// No settings (the entry has none).
    pub fn none() -> Self {
        Self::default()
    }

    /// Settings from the JSON text the host sends.
    pub fn from_json(text: Option<String>) -> Self {
        Self { text }
    }

    /// Settings from a JSON value (natively: tests).
    pub fn from_value(value: &serde_json::Value) -> Self {
        Self {
            text: Some(crate::json_text(value)),
        }
    }

    /// The JSON text, if there are settings.
    pub fn json(&self) -> Option<&str> {
        self.text.as_deref()
    }

    /// Decodes the settings into `T`; no settings (or `null`) give
    /// `T::default()`. The error says what does not fit, for the
    /// `InvalidSettings` event.
    pub fn get<T: DeserializeOwned + Default>(&self) -> std::result::Result<T, String> {
        match self.text.as_deref() {
            None | Some("null") => Ok(T::default()),
            Some(text) => serde_json::from_str(text).map_err(|e| format!("invalid settings: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default, PartialEq, serde::Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    struct Mine {
        #[serde(default)]
        default_image: Option<String>,
    }

    #[test]
    fn missing_settings_decode_as_the_default_and_bad_ones_say_why() {
        assert_eq!(Settings::none().get::<Mine>().unwrap(), Mine::default());
        let good = Settings::from_value(&serde_json::json!({"defaultImage": "redis:7"}));
        assert_eq!(
            good.get::<Mine>().unwrap().default_image.as_deref(),
            Some("redis:7")
        );
        let bad = Settings::from_value(&serde_json::json!({"colour": "blue"}));
        let err = bad.get::<Mine>().unwrap_err();
        assert!(err.contains("colour"), "{err}");
    }
}
