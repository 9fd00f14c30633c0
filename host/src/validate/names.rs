//! The name rules of Kubernetes the host checks before it writes: object
//! names, label and annotation keys and values, API groups, versions, kinds
//! and Event reasons. Each returns why a text breaks its rule.

/// Why a text breaks a rule.
pub type Why = &'static str;

/// A DNS-1123 subdomain (`a-b.c`), at most 253 characters: most object
/// names, API groups, and the prefix of a qualified name.
pub fn dns_subdomain(text: &str) -> Result<(), Why> {
    if text.is_empty() {
        return Err("must not be empty");
    }
    if text.len() > 253 {
        return Err("longer than 253 characters");
    }
    if !text
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
    {
        return Err("only lowercase letters, digits, '-' and '.' are allowed");
    }
    if text.split('.').any(|part| dns_label(part).is_err()) {
        return Err("every dot-separated part must start and end with a lowercase letter or digit");
    }
    Ok(())
}

/// A DNS-1123 label (`a-b`), at most 63 characters.
pub fn dns_label(text: &str) -> Result<(), Why> {
    if text.is_empty() {
        return Err("must not be empty");
    }
    if text.len() > 63 {
        return Err("longer than 63 characters");
    }
    if !text
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Err("only lowercase letters, digits and '-' are allowed");
    }
    let alnum = |b: Option<u8>| b.is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    if !alnum(text.bytes().next()) || !alnum(text.bytes().last()) {
        return Err("must start and end with a lowercase letter or digit");
    }
    Ok(())
}

/// The name part of a qualified name, and a non-empty label value: at most
/// 63 characters of letters, digits, '-', '_' and '.', starting and ending
/// with a letter or digit.
fn name_part(text: &str) -> Result<(), Why> {
    if text.is_empty() {
        return Err("must not be empty");
    }
    if text.len() > 63 {
        return Err("longer than 63 characters");
    }
    if !text
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        return Err("only letters, digits, '-', '_' and '.' are allowed");
    }
    let alnum = |b: Option<u8>| b.is_some_and(|b| b.is_ascii_alphanumeric());
    if !alnum(text.bytes().next()) || !alnum(text.bytes().last()) {
        return Err("must start and end with a letter or digit");
    }
    Ok(())
}

/// A qualified name: `[prefix/]name`, the form of label and annotation keys
/// and of finalizers.
pub fn qualified_name(text: &str) -> Result<(), Why> {
    match text.split_once('/') {
        Some((prefix, name)) => {
            dns_subdomain(prefix).map_err(|_| "its prefix must be a DNS subdomain")?;
            name_part(name)
        }
        None => name_part(text),
    }
}

/// A label value: empty, or like the name part of a qualified name.
pub fn label_value(text: &str) -> Result<(), Why> {
    if text.is_empty() {
        Ok(())
    } else {
        name_part(text)
    }
}

/// A finalizer: a qualified name with a domain prefix
/// (`apps.example.com/cleanup`), which the API server requires of every
/// finalizer it does not own.
pub fn finalizer(text: &str) -> Result<(), Why> {
    qualified_name(text)?;
    match text.split_once('/') {
        Some((prefix, _)) if prefix.contains('.') => Ok(()),
        _ => Err("needs a domain prefix, e.g. apps.example.com/cleanup"),
    }
}

/// A kind: CamelCase, a letter then letters and digits, at most 63.
pub fn kind(text: &str) -> Result<(), Why> {
    camel_case(text, 63)
}

/// An Event reason: CamelCase, a letter then letters and digits, at most
/// 128 characters (what the WIT promises; no spaces or control
/// characters).
pub fn event_reason(text: &str) -> Result<(), Why> {
    camel_case(text, 128)
}

fn camel_case(text: &str, max: usize) -> Result<(), Why> {
    let mut bytes = text.bytes();
    match bytes.next() {
        None => return Err("must not be empty"),
        Some(b) if !b.is_ascii_alphabetic() => return Err("must start with a letter"),
        Some(_) => {}
    }
    if text.len() > max {
        return Err(if max == 63 {
            "longer than 63 characters"
        } else {
            "longer than 128 characters"
        });
    }
    if !bytes.all(|b| b.is_ascii_alphanumeric()) {
        return Err("only letters and digits are allowed (CamelCase)");
    }
    Ok(())
}

/// An API version inside a group (`v1`, `v1beta2`, `v2alpha1`): a DNS label.
pub fn version(text: &str) -> Result<(), Why> {
    dns_label(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_names_are_dns_subdomains() {
        assert!(dns_subdomain("demo-config").is_ok());
        assert!(dns_subdomain("a.b-c.d").is_ok());
        for bad in ["", "Bad", "a_b", "-a", "a-", "a..b", &"a".repeat(254)] {
            assert!(dns_subdomain(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn label_keys_and_values_follow_the_qualified_name_rules() {
        for good in ["app", "app.kubernetes.io/name", "example.com/A_b.c-1"] {
            assert!(qualified_name(good).is_ok(), "{good:?}");
        }
        for bad in [
            "",
            "not a key!",
            "/x",
            "Example.com/x",
            "a/b/c",
            &"a".repeat(64),
        ] {
            assert!(qualified_name(bad).is_err(), "{bad:?}");
        }
        assert!(label_value("").is_ok());
        assert!(label_value("v2").is_ok());
        assert!(label_value("two words").is_err());
    }

    #[test]
    fn finalizers_need_a_domain_prefix() {
        assert!(finalizer("apps.example.com/cache-cleanup").is_ok());
        assert!(finalizer("cleanup").is_err());
        assert!(finalizer("local/cleanup").is_err());
        assert!(finalizer("apps.example.com/").is_err());
    }

    #[test]
    fn kinds_and_reasons_are_camel_case_without_control_characters() {
        assert!(kind("Deployment").is_ok());
        assert!(kind("*").is_err());
        assert!(kind("").is_err());
        assert!(event_reason("ScaledUp2").is_ok());
        assert!(event_reason("Bad\nReason").is_err());
        assert!(event_reason("Two Words").is_err());
        assert!(event_reason(&"A".repeat(129)).is_err());
        assert!(event_reason(&"A".repeat(128)).is_ok());
    }
}
