"""Defaulting and validation of a Cache, served by the host as admission
webhooks (the Rust guest's ``admission.rs``).

Defaults: ``spec.image`` from the setting ``defaultImage`` when empty, and
the Redis directive ``maxmemory-policy`` (``allkeys-lru``) when ``config``
sets neither it nor a whole file (``*.conf``). Validation, beyond what the
CRD's schema and CEL say: the image must name a tag other than ``latest``
(or a digest), and every ``config`` key must be a Redis directive this guest
knows or a file name ending in ``.conf``.
"""

from __future__ import annotations

import copy
import json
from typing import Optional

from conversion import V1ALPHA1, convert
from settings import parse_settings
from wasmop_sdk import Patch, Review, allow, deny, pointer_segment

#: The eviction policy a Cache gets when its config names none.
DEFAULT_MAXMEMORY_POLICY = "allkeys-lru"

#: Redis configuration directives a ``config`` key may name (redis.conf of Redis 7).
REDIS_DIRECTIVES = frozenset(
    """activedefrag active-defrag-cycle-max active-defrag-cycle-min active-defrag-ignore-bytes
    active-defrag-threshold-lower active-defrag-threshold-upper appendfilename appendfsync appendonly
    auto-aof-rewrite-min-size auto-aof-rewrite-percentage databases dir dbfilename
    hash-max-listpack-entries hash-max-listpack-value hz io-threads latency-monitor-threshold
    lazyfree-lazy-eviction lazyfree-lazy-expire lazyfree-lazy-server-del list-max-listpack-size
    loglevel lua-time-limit maxclients maxmemory maxmemory-policy maxmemory-samples
    min-replicas-max-lag min-replicas-to-write notify-keyspace-events protected-mode
    repl-backlog-size save set-max-intset-entries slowlog-log-slower-than slowlog-max-len
    stop-writes-on-bgsave-error tcp-backlog tcp-keepalive timeout zset-max-listpack-entries
    zset-max-listpack-value""".split()
)


def admit(review: Review):
    """The verdict on one request for a Cache in either version."""
    if review.operation not in ("create", "update") or review.object is None:
        return allow()
    obj = review.object
    try:
        settings = parse_settings(review.settings)
    except ValueError as e:
        return deny(str(e))
    api_version = obj.get("apiVersion") if isinstance(obj.get("apiVersion"), str) else ""
    group, slash, version = api_version.partition("/")
    if not slash:
        return deny("the Cache has no apiVersion")
    # Read every version in the v1alpha1 shape; patch in the object's own.
    try:
        alpha = convert(copy.deepcopy(obj), f"{group}/{V1ALPHA1}")
    except ValueError as e:
        return deny(str(e))
    spec = alpha.get("spec") if isinstance(alpha.get("spec"), dict) else {}
    patch = Patch()
    image = spec.get("image") if isinstance(spec.get("image"), str) else ""
    if image.strip() == "" and "defaultImage" in settings:
        image = settings["defaultImage"]
        patch.add("/spec/image", image)
    config = spec.get("config") if isinstance(spec.get("config"), dict) else None
    keys = sorted(config or {}, key=lambda k: k.encode("utf-8"))
    if not any(k == "maxmemory-policy" or k.endswith(".conf") for k in keys):
        entry = {"name": "maxmemory-policy", "value": DEFAULT_MAXMEMORY_POLICY}
        if version == V1ALPHA1:
            if config is None:
                patch.add("/spec/config", {"maxmemory-policy": DEFAULT_MAXMEMORY_POLICY})
            else:
                patch.add(f"/spec/config/{pointer_segment('maxmemory-policy')}", DEFAULT_MAXMEMORY_POLICY)
        elif config is None:
            patch.add("/spec/config", [entry])
        else:
            patch.add("/spec/config/-", entry)
    if not isinstance(obj.get("spec"), dict):
        return deny("the Cache has no spec")
    bad = _check_image(image)
    if bad is not None:
        return deny(bad)
    unknown = next((k for k in keys if not k.endswith(".conf") and k not in REDIS_DIRECTIVES), None)
    if unknown is not None:
        return deny(
            f"spec.config key {json.dumps(unknown, ensure_ascii=False)} is not a Redis directive "
            "this operator knows (nor a *.conf file)"
        )
    return patch.allow() if review.mutating else allow()


def _check_image(image: str) -> Optional[str]:
    """Why ``image`` is refused: it must name a tag other than ``latest``, or a digest."""
    if image.strip() == "":
        return "spec.image must not be empty (this guest has no setting defaultImage)"
    if "@" in image:
        return None
    quoted = json.dumps(image, ensure_ascii=False)
    last = image.rsplit("/", 1)[-1]
    _, colon, tag = last.partition(":")
    if not colon:
        return f"spec.image {quoted} has no tag: name one (such as redis:7.2), not latest"
    if tag == "latest":
        return f"spec.image {quoted} uses the tag latest: name a fixed version"
    if tag == "":
        return f"spec.image {quoted} has an empty tag"
    return None
