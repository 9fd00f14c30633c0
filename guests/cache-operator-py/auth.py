"""``spec.auth.secretRef``: the Secret key holding the cache server's
password, read from the request's related Secrets (the Rust guest's
``auth.rs``).

The guest declares Secrets as a related kind named at ``SECRET_NAME_POINTER``,
so the host hands it the Secret the Cache names and reconciles the Cache when
that Secret appears, changes or goes. The password reaches the pods through
``valueFrom.secretKeyRef``; the guest only needs to know that the key exists
and a hash of its value (with the host's default it receives the value's
SHA-256, not the value).
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from wasmop_sdk import Request, fnv1a64, kinds

#: Where a Cache names its Secret (the related kind's JSON pointer).
SECRET_NAME_POINTER = "/spec/auth/secretRef/name"
#: The pod-template annotation holding the hash of the password's value.
SECRET_HASH_ANNOTATION = "apps.example.com/secret-hash"
#: The environment variable the pods get the password in.
PASSWORD_ENV = "CACHE_PASSWORD"


def secret_ref_of(spec: Dict[str, Any]) -> Optional[Tuple[str, str]]:
    """``(name, key)`` of ``spec.auth.secretRef``, if ``spec.auth`` is given."""
    auth = spec.get("auth")
    if not isinstance(auth, dict):
        return None
    ref = auth.get("secretRef") if isinstance(auth.get("secretRef"), dict) else {}
    name, key = ref.get("name"), ref.get("key")
    return (name if isinstance(name, str) else "", key if isinstance(key, str) else "")


def password(request: Request, ref: Optional[Tuple[str, str]]) -> Tuple[str, ...]:
    """The password ``ref`` asks for: ``("none",)``, ``("found", name, key,
    hash)`` or ``("missing", message)``."""
    if ref is None:
        return ("none",)
    name, key = ref
    secret = request.related_named(kinds.secret, name)
    if secret is None:
        return ("missing", f"Secret {name} (key {key}) does not exist in the Cache's namespace")
    data = secret.get("data") if isinstance(secret.get("data"), dict) else {}
    value = data.get(key)
    if not isinstance(value, str):
        return ("missing", f"Secret {name} has no key {key}")
    return ("found", name, key, fnv1a64(value))
