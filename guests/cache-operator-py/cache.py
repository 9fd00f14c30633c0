"""The seeds' ``Cache`` operator in Python, with the Rust guest's behaviour.

For a Cache (``apps.example.com/v1alpha1``) it wants a ConfigMap
``<name>-config`` holding ``spec.config``, a Deployment ``<name>`` running
``spec.image`` with the config mounted and its hash on the pod template (a
config change rolls the pods), and a Service ``<name>``. It reports
``readyReplicas``, ``phase`` and the conditions ``Available`` and
``Progressing``; while ``paused`` it keeps every child as it is; on deletion
its finalizer scales the Deployment to zero and holds the Cache until the
pods are gone.

A change of ``spec.image`` after a first complete rollout is an upgrade:
``Upgrading=True`` while it rolls out (phase ``Ready`` while the ready pods,
old or new, are as many as ``spec.replicas``),
``Upgrading=False``/``Upgraded=True`` (reason ``Upgraded``),
``lastGoodImage`` and one Event ``Upgraded`` when every replica runs it;
when the Deployment controller reports ``ProgressDeadlineExceeded`` (the
Deployment's ``progressDeadlineSeconds`` is ``spec.upgrade.timeoutSeconds``),
the Deployment goes back to ``lastGoodImage``, ``failedImage`` records the
image (not tried again while ``spec.image`` names it), ``Upgrading=False``
and ``Upgraded=False`` (reason ``RolledBack``), a Warning Event
``UpgradeRolledBack``, phase ``Degraded``.

With ``spec.auth.secretRef`` (a Secret's ``name`` and ``key``, the Secret a
related object) the pods get the password in ``CACHE_PASSWORD`` and its
value's hash on the pod template (a rotation rolls them); while the Secret or
key is missing the Cache is ``Pending``, ``SecretMissing``, and no child
changes (``auth``). With the setting ``registryUrl`` (the build with outbound
HTTP) a Ready Cache is registered with an external registry and removed from
it before the finalizer goes (``registry``). Admission (``admission``) and
the conversion between ``v1alpha1`` and ``v1beta1`` (``conversion``) are
exported beside the reconcile.

Settings (``settings``): ``defaultImage`` (the image of a Cache with an empty
``spec.image``), ``apiGroup`` (the Cache kind's group), ``version`` (the
Cache version reconciled: ``v1alpha1`` or the stored ``v1beta1``) and
``registryUrl``.

Everything is a pure function of the request: a converged Cache gets the
same children and status on every resync, and the host writes nothing.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any, Dict, List, Optional, Tuple


from admission import admit
from auth import PASSWORD_ENV, SECRET_HASH_ANNOTATION, SECRET_NAME_POINTER, password, secret_ref_of
from conversion import V1ALPHA1, convert
from registry import Registry
from settings import parse_settings, version_of
from wasmop_sdk import (
    GuestError,
    Review,
    ObjectRef,
    Request,
    Response,
    canonical_json,
    conditions_of,
    describe,
    find_condition,
    fnv1a64,
    kind_ref,
    kinds,
    labels,
    log,
    object_meta,
    related_by_name,
    set_condition,
)

GROUP = "apps.example.com"
FINALIZER = "apps.example.com/cache-cleanup"
CONFIG_HASH_ANNOTATION = "apps.example.com/config-hash"
CONFIG_MOUNT_PATH = "/etc/cache"
CONTAINER_NAME = "cache"
PORT_NAME = "cache"
CONFIG_VOLUME = "config"
DEFAULT_REPLICAS = 1
DEFAULT_PORT = 6379
MAX_REPLICAS = 10
#: ``spec.upgrade.timeoutSeconds`` when absent, and its bounds (the CRD's).
DEFAULT_UPGRADE_TIMEOUT_SECONDS = 300
MIN_UPGRADE_TIMEOUT_SECONDS = 30
MAX_UPGRADE_TIMEOUT_SECONDS = 3600
#: The reason the Deployment controller gives a rollout past its deadline.
PROGRESS_DEADLINE_EXCEEDED = "ProgressDeadlineExceeded"
#: How often a deleting Cache is looked at while its pods stop: a backstop,
#: since each change of the Deployment's ``status.replicas`` wakes the host.
POLL_SECONDS = 30

_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
#: Condition reason: the Secret or key ``spec.auth.secretRef`` names is missing.
SECRET_MISSING = "SecretMissing"


def _is_config_map_key(key: str) -> bool:
    return 0 < len(key) <= 253 and key not in (".", "..") and bool(_CONFIG_KEY.match(key))


def _int(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def spec_of(cache: Dict[str, Any], settings: Dict[str, str]) -> Dict[str, Any]:
    """The spec with defaults applied."""
    raw = cache.get("spec") if isinstance(cache.get("spec"), dict) else {}
    image = raw.get("image") if isinstance(raw.get("image"), str) else ""
    if image.strip() == "" and "defaultImage" in settings:
        image = settings["defaultImage"]
    config = raw.get("config") if isinstance(raw.get("config"), dict) else {}
    replicas = raw.get("replicas")
    port = raw.get("port")
    upgrade = raw.get("upgrade") if isinstance(raw.get("upgrade"), dict) else {}
    timeout = upgrade.get("timeoutSeconds")
    return {
        "image": image,
        "auth": secret_ref_of(raw),
        "replicas": replicas if isinstance(replicas, (int, float)) and not isinstance(replicas, bool) else DEFAULT_REPLICAS,
        "port": port if isinstance(port, (int, float)) and not isinstance(port, bool) else DEFAULT_PORT,
        "config": {str(k): str(v) for k, v in config.items()},
        "paused": raw.get("paused") is True,
        "upgradeTimeoutSeconds": (
            timeout
            if isinstance(timeout, (int, float)) and not isinstance(timeout, bool)
            else DEFAULT_UPGRADE_TIMEOUT_SECONDS
        ),
    }


def validate(spec: Dict[str, Any]) -> None:
    """A violation is permanent: retrying cannot fix it."""
    if spec["image"].strip() == "":
        raise GuestError.permanent("spec.image must not be empty (this guest has no setting defaultImage)")
    if spec["auth"] is not None:
        name, key = spec["auth"]
        if name == "" or len(name.encode("utf-8")) > 253:
            raise GuestError.permanent("spec.auth.secretRef.name must be 1 to 253 characters")
        if not _is_config_map_key(key):
            raise GuestError.permanent(
                f"spec.auth.secretRef.key {json.dumps(key, ensure_ascii=False)} is not a valid Secret key"
            )
    replicas = spec["replicas"]
    if _int(replicas) is None or not 1 <= replicas <= MAX_REPLICAS:
        raise GuestError.permanent(f"spec.replicas must be between 1 and {MAX_REPLICAS}, got {replicas}")
    port = spec["port"]
    if _int(port) is None or not 1 <= port <= 65535:
        raise GuestError.permanent(f"spec.port must be between 1 and 65535, got {port}")
    timeout = spec["upgradeTimeoutSeconds"]
    if _int(timeout) is None or not MIN_UPGRADE_TIMEOUT_SECONDS <= timeout <= MAX_UPGRADE_TIMEOUT_SECONDS:
        raise GuestError.permanent(
            f"spec.upgrade.timeoutSeconds must be between {MIN_UPGRADE_TIMEOUT_SECONDS} "
            f"and {MAX_UPGRADE_TIMEOUT_SECONDS}, got {timeout}"
        )
    for key in spec["config"]:
        if not _is_config_map_key(key):
            raise GuestError.permanent(
                f'spec.config key "{key}" is not a valid file name '
                "(letters, digits, '-', '_' and '.', at most 253 characters)"
            )


def config_hash(config: Dict[str, str]) -> str:
    """The 64-bit FNV-1a hash of the config as sorted compact JSON (the Rust guest's)."""
    return fnv1a64(canonical_json(config))


def _selector(name: str) -> Dict[str, str]:
    return labels({"app": "cache", "cache": name})


def _config_map(name: str, spec: Dict[str, Any]) -> Dict[str, Any]:
    obj: Dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": object_meta(f"{name}-config", _selector(name)),
    }
    if spec["config"]:
        obj["data"] = spec["config"]
    return obj


def _deployment(
    name: str, spec: Dict[str, Any], hash_: str, secret: Tuple[str, ...], replicas: Optional[int] = None
) -> Dict[str, Any]:
    selector = _selector(name)
    annotations = {CONFIG_HASH_ANNOTATION: hash_}
    container: Dict[str, Any] = {
        "name": CONTAINER_NAME,
        "image": spec["image"],
        "ports": [{"name": PORT_NAME, "containerPort": spec["port"]}],
        "volumeMounts": [{"name": CONFIG_VOLUME, "mountPath": CONFIG_MOUNT_PATH, "readOnly": True}],
    }
    if secret[0] == "found":
        annotations[SECRET_HASH_ANNOTATION] = secret[3]
        container["env"] = [
            {"name": PASSWORD_ENV, "valueFrom": {"secretKeyRef": {"name": secret[1], "key": secret[2]}}}
        ]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": object_meta(name, _selector(name)),
        "spec": {
            "replicas": spec["replicas"] if replicas is None else replicas,
            # Kubernetes' own verdict on a rollout: after this long without
            # progress the Deployment controller reports ProgressDeadlineExceeded.
            "progressDeadlineSeconds": spec["upgradeTimeoutSeconds"],
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": selector, "annotations": annotations},
                "spec": {
                    "containers": [container],
                    "volumes": [{"name": CONFIG_VOLUME, "configMap": {"name": f"{name}-config"}}],
                },
            },
        },
    }


def _service(name: str, spec: Dict[str, Any]) -> Dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": object_meta(name, _selector(name)),
        "spec": {
            "selector": _selector(name),
            "ports": [{"name": PORT_NAME, "port": spec["port"], "targetPort": spec["port"]}],
        },
    }


def _get(obj: Any, *path: Any) -> Any:
    for key in path:
        if isinstance(obj, dict):
            obj = obj.get(key)
        elif isinstance(obj, list) and isinstance(key, int):
            obj = obj[key] if 0 <= key < len(obj) else None
        else:
            return None
    return obj


def _fingerprint(observed: Dict[str, Any]) -> Tuple[Any, Any, Any, Any, Any]:
    """(replicas, image, port, config hash, secret hash) as the Deployment's spec asks."""
    containers = _get(observed, "spec", "template", "spec", "containers")
    container = next(
        (c for c in containers if isinstance(c, dict) and c.get("name") == CONTAINER_NAME),
        None,
    ) if isinstance(containers, list) else None
    image = _get(container, "image")
    hash_ = _get(observed, "spec", "template", "metadata", "annotations", CONFIG_HASH_ANNOTATION)
    secret = _get(observed, "spec", "template", "metadata", "annotations", SECRET_HASH_ANNOTATION)
    return (
        _int(_get(observed, "spec", "replicas")),
        image if isinstance(image, str) else None,
        _int(_get(container, "ports", 0, "containerPort")),
        hash_ if isinstance(hash_, str) else None,
        secret if isinstance(secret, str) else None,
    )


def _seen_latest(observed: Dict[str, Any]) -> bool:
    """Whether the Deployment's controller has seen its latest generation."""
    seen = _int(_get(observed, "status", "observedGeneration"))
    generation = _get(observed, "metadata", "generation")
    return True if generation is None else seen is not None and seen >= generation


def _rollout_complete(observed: Dict[str, Any], desired: Tuple[Any, Any, Any, Any, Any]) -> bool:
    status = observed.get("status")
    if not isinstance(status, dict):
        return False
    replicas = desired[0]
    return (
        _fingerprint(observed) == desired
        and _seen_latest(observed)
        and all((_int(status.get(f)) or 0) == replicas for f in ("replicas", "updatedReplicas", "readyReplicas"))
    )


def _progress_deadline_exceeded(observed: Dict[str, Any]) -> bool:
    """The Deployment's controller, having seen its latest spec, says the
    rollout failed: ``Progressing=False``, reason ``ProgressDeadlineExceeded``."""
    status = observed.get("status")
    conditions = _get(status, "conditions")
    return (
        isinstance(status, dict)
        and _seen_latest(observed)
        and isinstance(conditions, list)
        and any(
            isinstance(c, dict)
            and c.get("type") == "Progressing"
            and c.get("status") == "False"
            and c.get("reason") == PROGRESS_DEADLINE_EXCEEDED
            for c in conditions
        )
    )


def _ready(observed: Optional[Dict[str, Any]]) -> int:
    return _int(_get(observed, "status", "readyReplicas")) or 0


def status_of(
    previous: Optional[Dict[str, Any]],
    phase: str,
    ready: int,
    replicas: int,
    generation: Optional[int],
    now: str,
) -> Dict[str, Any]:
    """The status to report, keeping the previous conditions' transition times."""
    conditions = conditions_of(previous)
    counts = f"{ready}/{replicas} replicas ready"
    if phase == "Pending":
        available = ("False", "DeploymentPending")
    elif ready > 0:
        available = ("True", "ReplicasAvailable")
    else:
        available = ("False", "NoReplicasAvailable")
    progressing = {
        "Pending": ("True", "Creating", "creating the Deployment, Service and ConfigMap"),
        "Progressing": ("True", "RollingOut", counts),
        "Degraded": ("True", "RollingOut", counts),
        "Ready": ("False", "RolloutComplete", counts),
        "Paused": ("Unknown", "Paused", "spec.paused is true: children are left as they are"),
    }[phase]
    set_condition(conditions, "Available", available[0], available[1], counts, generation, now)
    set_condition(conditions, "Progressing", *progressing, generation, now)
    status: Dict[str, Any] = {"readyReplicas": ready, "phase": phase}
    for key in ("lastGoodImage", "failedImage"):
        if isinstance((previous or {}).get(key), str):
            status[key] = previous[key]
    if conditions:
        status["conditions"] = conditions
    return status


def _string_at(status: Optional[Dict[str, Any]], key: str) -> Optional[str]:
    value = (status or {}).get(key)
    return value if isinstance(value, str) else None


def held_image(image: str, status: Optional[Dict[str, Any]]) -> Optional[str]:
    """The last good image while ``image`` is the one that failed; ``None`` otherwise."""
    return _string_at(status, "lastGoodImage") if _string_at(status, "failedImage") == image else None


def decide_upgrade(
    image: str,
    status: Optional[Dict[str, Any]],
    observed: Optional[Dict[str, Any]],
    wanted: Tuple[Any, Any, Any, Any, Any],
) -> Tuple[str, ...]:
    """Where ``image`` (``spec.image``) stands (the Rust guest's ``upgrade::Upgrade``):
    ``("none",)``, ``("rollingOut", from, to)``, ``("completed", from, to)``,
    ``("rollBack", failed, to)`` or ``("heldBack", to)``; ``wanted`` is the
    Deployment running ``image``."""
    good = _string_at(status, "lastGoodImage")
    if good is None or image == good:
        return ("none",)
    held = held_image(image, status)
    if held is not None:
        return ("heldBack", held)
    if observed is not None and _rollout_complete(observed, wanted):
        return ("completed", good, image)
    if observed is not None and _fingerprint(observed)[1] == image and _progress_deadline_exceeded(observed):
        return ("rollBack", image, good)
    return ("rollingOut", good, image)


def _held_at(upgrade: Tuple[str, ...]) -> Optional[str]:
    """The image the Deployment runs instead of ``spec.image`` after a rollback."""
    return upgrade[-1] if upgrade[0] in ("rollBack", "heldBack") else None


def _upgrade_phase(upgrade: Tuple[str, ...], rollout: str, ready: int, replicas: int) -> str:
    """The phase to report over the Deployment's own ``rollout`` phase."""
    if upgrade[0] == "rollingOut" and ready >= replicas:
        return "Ready"
    if upgrade[0] in ("rollBack", "heldBack"):
        return "Degraded"
    return rollout


def report_upgrade(
    upgrade: Tuple[str, ...],
    status: Dict[str, Any],
    image: str,
    rollout: str,
    generation: Optional[int],
    timeout: int,
    now: str,
) -> Optional[Tuple[str, str, str]]:
    """Brings ``lastGoodImage``, ``failedImage``, ``Upgrading`` and ``Upgraded``
    of ``status`` up to date; the Event of an upgrade that ended now, if any."""
    conditions = status["conditions"]

    def set_(type_: str, state: bool, reason: str, message: str) -> None:
        set_condition(conditions, type_, "True" if state else "False", reason, message, generation, now)

    kind = upgrade[0]
    if kind == "none":
        if rollout == "Ready" and "lastGoodImage" not in status:
            status["lastGoodImage"] = image
        if status.get("lastGoodImage") == image:
            status.pop("failedImage", None)
        upgrading = find_condition(conditions, "Upgrading")
        if upgrading is not None and upgrading["status"] == "True":
            set_("Upgrading", False, "Cancelled", f"spec.image is {image} again")
        return None
    if kind == "rollingOut":
        _, old, new = upgrade
        status.pop("failedImage", None)
        set_("Upgrading", True, "RollingOut", f"{old} -> {new}")
        return None
    if kind == "completed":
        _, old, new = upgrade
        message = f"{old} -> {new}"
        status.pop("failedImage", None)
        status["lastGoodImage"] = new
        set_("Upgrading", False, "Upgraded", message)
        set_("Upgraded", True, "Upgraded", message)
        return ("normal", "Upgraded", f"upgraded from {old} to {new}: every replica is Ready")
    if kind == "rollBack":
        _, failed, good = upgrade
        message = (
            f"the rollout of {failed} made no progress for {timeout} s "
            f"({PROGRESS_DEADLINE_EXCEEDED}); rolled back to {good}"
        )
        status["failedImage"] = failed
        set_("Upgrading", False, "RolledBack", message)
        set_("Upgraded", False, "RolledBack", message)
        return ("warning", "UpgradeRolledBack", message)
    return None


def _phase_event(previous: Optional[Dict[str, Any]], phase: str) -> List[Tuple[str, str]]:
    before = (previous or {}).get("phase")
    before = before if isinstance(before, str) else None
    if before == phase:
        return []
    return [("PhaseChanged", f"phase is {phase}" if before is None else f"phase changed from {before} to {phase}")]


def _change_events(name: str, observed: Optional[Dict[str, Any]], wanted: Tuple[Any, Any, Any, Any, Any]) -> List[Tuple[str, str]]:
    if observed is None:
        return [("Created", f"creating Deployment {name}, Service {name} and ConfigMap {name}-config")]
    was = _fingerprint(observed)
    events = []
    if was[0] != wanted[0]:
        events.append(("Scaled", f"scaling Deployment {name} from {was[0] or 0} to {wanted[0] or 0} replicas"))
    if was[1] != wanted[1]:
        events.append(
            ("ImageChanged", f"updating Deployment {name} from image {was[1] or '(none)'} to {wanted[1] or '(none)'}")
        )
    if was[3] != wanted[3]:
        events.append(("ConfigChanged", f"the config changed; rolling the pods of Deployment {name}"))
    if was[4] != wanted[4]:
        events.append(("SecretChanged", f"the password Secret changed; rolling the pods of Deployment {name}"))
    return events


def _stop(request: Request, name: str, spec: Dict[str, Any]) -> Response:
    """Scales the Deployment down; ``finalized`` once no pod is left."""

    def is_deployment(ref: ObjectRef) -> bool:
        return ref.api_version == "apps/v1" and ref.kind == "Deployment" and ref.name == name

    response = Response().keep_observed(request, is_deployment)
    observed = request.observed_named(kinds.deployment, name)
    if observed is None:
        return response.finalize().normal("CleanupComplete", f"no Deployment {name} left; the Cache can go")
    ref = ObjectRef(api_version="apps/v1", kind="Deployment", name=name)
    pods = _int(_get(observed, "status", "replicas")) or 0
    if pods == 0:
        return (
            response.keep(ref)
            .finalize()
            .normal("CleanupComplete", f"all pods of Deployment {name} have stopped; the Cache can go")
        )
    try:
        validate(spec)
    except GuestError as e:
        return (
            response.keep(ref)
            .finalize()
            .warning(
                "CleanupSkipped",
                f"cannot scale Deployment {name} down ({e.message}); the garbage collector removes it with the Cache",
            )
        )
    # The image the Deployment runs: after a rollback, not the spec's.
    held = held_image(spec["image"], request.status)
    running = spec if held is None else dict(spec, image=held)
    secret = password(request, spec["auth"])
    response.child(_deployment(name, running, config_hash(spec["config"]), secret, replicas=0))
    wanted = _fingerprint(observed)[0] or 0
    response.requeue_after(POLL_SECONDS)
    if wanted == 0:
        return response.normal("CleanupWaiting", f"waiting for {pods} pod(s) of Deployment {name} to stop")
    return response.normal("CleanupStarted", f"scaling Deployment {name} from {wanted} to 0 replicas before deletion")


def _reconcile_deletion(
    request: Request, cache: Dict[str, Any], name: str, spec: Dict[str, Any], registry: Optional[Registry]
) -> Response:
    """``_stop``, and once it is finalized, the Cache taken out of its
    registry (``registryUrl``) if it may be in it; while that fails every
    child is kept and the Cache stays."""
    answer = _stop(request, name, spec)
    if not answer.to_wire().finalized or registry is None:
        return answer
    outcome = registry.deregister(_status(cache), request.now)
    if outcome[0] == "not-registered":
        return answer
    if outcome[0] == "removed":
        return answer.normal("Deregistered", f"removed Cache {name} from its registry").status(outcome[1])
    _, status, event, retry_after = outcome
    blocked = Response().keep_observed(request)
    if event is not None:
        blocked.warning(event[1], event[2])
    return blocked.requeue_after(retry_after).status(status)


def _status(cache: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    status = cache.get("status")
    return status if isinstance(status, dict) else None


def _reconcile_paused(request: Request, cache: Dict[str, Any], name: str, spec: Dict[str, Any]) -> Response:
    response = Response().keep_observed(request)
    previous = _status(cache)
    for reason, message in _phase_event(previous, "Paused"):
        response.normal(reason, message)
    ready = _ready(request.observed_named(kinds.deployment, name))
    return response.status(status_of(previous, "Paused", ready, spec["replicas"], request.generation, request.now))


def _reconcile_secret_missing(request: Request, cache: Dict[str, Any], name: str, message: str) -> Response:
    """Every observed child kept as it is, phase ``Pending`` with
    ``SecretMissing``, and a Warning Event when the Cache did not report it
    already."""
    response = Response().keep_observed(request)
    previous = _status(cache)
    conditions = conditions_of(previous)
    reported = (find_condition(conditions, "Available") or {}).get("reason") == SECRET_MISSING
    for type_ in ("Available", "Progressing"):
        set_condition(conditions, type_, "False", SECRET_MISSING, message, request.generation, request.now)
    status: Dict[str, Any] = {"readyReplicas": _ready(request.observed_named(kinds.deployment, name)), "phase": "Pending"}
    for key in ("lastGoodImage", "failedImage"):
        if isinstance((previous or {}).get(key), str):
            status[key] = previous[key]
    status["conditions"] = conditions
    if not reported:
        log.info(f"cache {name}: {message}")
        response.warning(SECRET_MISSING, message)
    for reason, text in _phase_event(previous, "Pending"):
        response.normal(reason, text)
    return response.status(status)


def _parent_of(request: Request, settings: Dict[str, str]) -> Dict[str, Any]:
    """The parent in the v1alpha1 shape the logic is written for."""
    if version_of(settings) == V1ALPHA1:
        return request.parent
    api_version = request.parent.get("apiVersion") if isinstance(request.parent.get("apiVersion"), str) else ""
    group = api_version.partition("/")[0] if "/" in api_version else ""
    try:
        return convert(copy.deepcopy(request.parent), f"{group}/{V1ALPHA1}")
    except ValueError as e:
        raise GuestError.permanent(str(e)) from None


def _registry_of(settings: Dict[str, str], cache: Dict[str, Any], name: str, spec: Dict[str, Any]) -> Optional[Registry]:
    if "registryUrl" not in settings:
        return None
    meta = cache.get("metadata") or {}
    return Registry(settings["registryUrl"], name, meta.get("namespace") or "default", spec["port"], meta.get("generation"))


def reconcile(request: Request) -> Response:
    """One reconcile of a Cache."""
    try:
        settings = parse_settings(request.settings)
    except ValueError as e:
        raise GuestError.permanent(str(e)) from None
    cache = _parent_of(request, settings)
    name = (cache.get("metadata") or {}).get("name") or ""
    if name == "":
        raise GuestError.permanent("the Cache has no metadata.name")
    spec = spec_of(cache, settings)
    # Deletion first: a paused or invalid Cache must still be deletable.
    if request.deleting:
        return _reconcile_deletion(request, cache, name, spec, _registry_of(settings, cache, name, spec))
    if spec["paused"]:
        return _reconcile_paused(request, cache, name, spec)
    validate(spec)
    secret = password(request, spec["auth"])
    if secret[0] == "missing":
        return _reconcile_secret_missing(request, cache, name, secret[1])
    secret_hash = secret[3] if secret[0] == "found" else None
    hash_ = config_hash(spec["config"])
    observed = request.observed_named(kinds.deployment, name)
    previous = _status(cache)
    upgrade = decide_upgrade(
        spec["image"], previous, observed, (spec["replicas"], spec["image"], spec["port"], hash_, secret_hash)
    )
    # After a rollback the Deployment runs the last good image, not the
    # spec's: the spec is the user's and stays as it is.
    held = _held_at(upgrade)
    running = spec if held is None else dict(spec, image=held)
    wanted = (running["replicas"], running["image"], running["port"], hash_, secret_hash)
    if observed is None:
        rollout = "Pending"
    elif _rollout_complete(observed, wanted):
        rollout = "Ready"
    else:
        rollout = "Progressing"
    ready = _ready(observed)
    status = status_of(previous, rollout, ready, spec["replicas"], request.generation, request.now)
    upgrade_event = report_upgrade(
        upgrade, status, spec["image"], rollout, request.generation, spec["upgradeTimeoutSeconds"], request.now
    )
    phase = _upgrade_phase(upgrade, rollout, ready, spec["replicas"])
    status["phase"] = phase
    response = Response()
    registry_event = None
    registry = _registry_of(settings, cache, name, spec)
    if phase == "Ready" and registry is not None:
        registry_event, retry = registry.register(status, request.now)
        if retry is not None:
            response.requeue_after(retry)
    events = (
        ([registry_event] if registry_event is not None else [])
        + [("normal", reason, message) for reason, message in _change_events(name, observed, wanted)]
        + ([upgrade_event] if upgrade_event is not None else [])
        + [("normal", reason, message) for reason, message in _phase_event(previous, phase)]
    )
    for type_, reason, message in events:
        log.info(f"cache {name}: {reason}: {message}")
        if type_ == "warning":
            response.warning(reason, message)
        else:
            response.normal(reason, message)
    return (
        response.child(_config_map(name, running))
        .child(_deployment(name, running, hash_, secret))
        .child(_service(name, running))
        .status(status)
    )


class CacheOperator:
    """The Cache operator: reconcile, admission and conversion."""

    def describe(self, settings: Any):
        parsed = parse_settings(settings)
        return describe(
            kind_ref(parsed.get("apiGroup", GROUP), version_of(parsed), "Cache"),
            [kinds.config_map, kinds.deployment, kinds.service],
            finalizer=FINALIZER,
            related=[related_by_name(kinds.secret, SECRET_NAME_POINTER)],
        )

    def reconcile(self, request: Request) -> Response:
        return reconcile(request)

    def admit(self, review: Review):
        return admit(review)

    def convert(self, obj: Dict[str, Any], desired_api_version: str) -> Dict[str, Any]:
        return convert(obj, desired_api_version)
