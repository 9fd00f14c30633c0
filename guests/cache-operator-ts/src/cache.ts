// The seeds' `Cache` operator in TypeScript, with the Rust guest's behaviour
// (guests/cache-operator): for a Cache (`apps.example.com/v1alpha1`) it
// wants a ConfigMap `<name>-config` holding `spec.config`, a Deployment
// `<name>` running `spec.image` with the config mounted and its hash on the
// pod template (a config change rolls the pods), and a Service `<name>`. It
// reports `readyReplicas`, `phase` and the conditions `Available` and
// `Progressing`; while `paused` it keeps every child as it is; on deletion
// its finalizer scales the Deployment to zero and holds the Cache until the
// pods are gone.
//
// A change of `spec.image` after a first complete rollout is an upgrade:
// `Upgrading=True` while it rolls out (phase `Ready` while the ready pods,
// old or new, are as many as `spec.replicas`),
// `Upgrading=False`/`Upgraded=True` (reason `Upgraded`), `lastGoodImage`
// and one Event `Upgraded` when every replica runs it; when the Deployment
// controller reports `ProgressDeadlineExceeded` (the Deployment's
// `progressDeadlineSeconds` is `spec.upgrade.timeoutSeconds`), the
// Deployment goes back to `lastGoodImage`, `failedImage` records the image
// (not tried again while `spec.image` names it), `Upgrading=False` and
// `Upgraded=False` (reason `RolledBack`), a Warning Event
// `UpgradeRolledBack`, phase `Degraded`.
//
// With `spec.auth.secretRef` (a Secret's `name` and `key`, the Secret a
// related object) the pods get the password in `CACHE_PASSWORD` and its
// value's hash on the pod template (a rotation rolls them); while the Secret
// or key is missing the Cache is `Pending`, `SecretMissing`, and no child
// changes (`auth.ts`). With the setting `registryUrl` (the build with
// outbound HTTP) a Ready Cache is registered with an external registry and
// removed from it before the finalizer goes (`registry.ts`). Admission
// (`admission.ts`) and the conversion between `v1alpha1` and `v1beta1`
// (`conversion.ts`) are exported beside the reconcile.
//
// Settings (`settings.ts`): `defaultImage` (the image of a Cache with an
// empty `spec.image`), `apiGroup` (the Cache kind's group), `version` (the
// Cache version reconciled: `v1alpha1` or the stored `v1beta1`) and
// `registryUrl`.
//
// Everything is a pure function of the request: a converged Cache gets the
// same children and status on every resync, and the host writes nothing.

import {
  type Admission,
  type AdmissionResponse,
  type Condition,
  type Conversion,
  type ConditionStatus,
  canonicalJson,
  conditionsOf,
  DescriptionBuilder,
  findCondition,
  fnv1a64,
  GuestError,
  type JsonObject,
  type KubeObject,
  kindRef,
  kinds,
  labels,
  log,
  type ObjectRef,
  type Operator,
  objectMeta,
  type Request,
  Response,
  type Review,
  setCondition,
} from "../../sdk-ts/src/index.ts";
import { admit } from "./admission.ts";
import { PASSWORD_ENV, type Password, password, SECRET_HASH_ANNOTATION, SECRET_NAME_POINTER, secretRefOf } from "./auth.ts";
import { convert, V1ALPHA1 } from "./conversion.ts";
import { Registry } from "./registry.ts";
import { parseSettings, type Settings, versionOf } from "./settings.ts";

export { parseSettings };

export const GROUP = "apps.example.com";
export const FINALIZER = "apps.example.com/cache-cleanup";
export const CONFIG_HASH_ANNOTATION = "apps.example.com/config-hash";
export const CONFIG_MOUNT_PATH = "/etc/cache";
const CONTAINER_NAME = "cache";
const PORT_NAME = "cache";
const CONFIG_VOLUME = "config";
const DEFAULT_REPLICAS = 1;
const DEFAULT_PORT = 6379;
const MAX_REPLICAS = 10;
/** `spec.upgrade.timeoutSeconds` when absent, and its bounds (the CRD's). */
const DEFAULT_UPGRADE_TIMEOUT_SECONDS = 300;
const MIN_UPGRADE_TIMEOUT_SECONDS = 30;
const MAX_UPGRADE_TIMEOUT_SECONDS = 3600;
/** The reason the Deployment controller gives a rollout past its deadline. */
const PROGRESS_DEADLINE_EXCEEDED = "ProgressDeadlineExceeded";
/**
 * How often a deleting Cache is looked at while its pods stop: a backstop,
 * since each change of the Deployment's `status.replicas` wakes the host.
 */
const POLL_SECONDS = 30;

export type Phase = "Pending" | "Progressing" | "Ready" | "Paused" | "Degraded";

interface Spec {
  image: string;
  auth: { name: string; key: string } | undefined;
  replicas: number;
  port: number;
  config: { [key: string]: string };
  paused: boolean;
  upgradeTimeoutSeconds: number;
}

function isConfigMapKey(key: string): boolean {
  return key.length > 0 && key.length <= 253 && key !== "." && key !== ".." && /^[-._a-zA-Z0-9]+$/.test(key);
}

/** The spec with defaults applied; a violation is permanent. */
function specOf(cache: KubeObject, settings: Settings): Spec {
  const raw = (cache.spec ?? {}) as JsonObject;
  let image = typeof raw.image === "string" ? raw.image : "";
  if (image.trim() === "" && settings.defaultImage !== undefined) {
    image = settings.defaultImage;
  }
  const config: { [key: string]: string } = {};
  if (raw.config !== null && typeof raw.config === "object" && !Array.isArray(raw.config)) {
    for (const [key, value] of Object.entries(raw.config as JsonObject)) {
      config[key] = String(value);
    }
  }
  const timeout = get(raw, "upgrade", "timeoutSeconds");
  return {
    image,
    auth: secretRefOf(raw),
    replicas: typeof raw.replicas === "number" ? raw.replicas : DEFAULT_REPLICAS,
    port: typeof raw.port === "number" ? raw.port : DEFAULT_PORT,
    config,
    paused: raw.paused === true,
    upgradeTimeoutSeconds: typeof timeout === "number" ? timeout : DEFAULT_UPGRADE_TIMEOUT_SECONDS,
  };
}

function validate(spec: Spec): void {
  if (spec.image.trim() === "") {
    throw GuestError.permanent("spec.image must not be empty (this guest has no setting defaultImage)");
  }
  if (spec.auth !== undefined) {
    if (spec.auth.name === "" || new TextEncoder().encode(spec.auth.name).length > 253) {
      throw GuestError.permanent("spec.auth.secretRef.name must be 1 to 253 characters");
    }
    if (!isConfigMapKey(spec.auth.key)) {
      throw GuestError.permanent(`spec.auth.secretRef.key ${JSON.stringify(spec.auth.key)} is not a valid Secret key`);
    }
  }
  if (!Number.isInteger(spec.replicas) || spec.replicas < 1 || spec.replicas > MAX_REPLICAS) {
    throw GuestError.permanent(`spec.replicas must be between 1 and ${MAX_REPLICAS}, got ${spec.replicas}`);
  }
  if (!Number.isInteger(spec.port) || spec.port < 1 || spec.port > 65535) {
    throw GuestError.permanent(`spec.port must be between 1 and 65535, got ${spec.port}`);
  }
  const timeout = spec.upgradeTimeoutSeconds;
  if (!Number.isInteger(timeout) || timeout < MIN_UPGRADE_TIMEOUT_SECONDS || timeout > MAX_UPGRADE_TIMEOUT_SECONDS) {
    throw GuestError.permanent(
      `spec.upgrade.timeoutSeconds must be between ${MIN_UPGRADE_TIMEOUT_SECONDS} and ${MAX_UPGRADE_TIMEOUT_SECONDS}, got ${timeout}`,
    );
  }
  const bad = Object.keys(spec.config).find((key) => !isConfigMapKey(key));
  if (bad !== undefined) {
    throw GuestError.permanent(
      `spec.config key ${JSON.stringify(bad)} is not a valid file name (letters, digits, '-', '_' and '.', at most 253 characters)`,
    );
  }
}

/** The 64-bit FNV-1a hash of the config as sorted compact JSON (the Rust guest's). */
export function configHash(config: { [key: string]: string }): string {
  return fnv1a64(canonicalJson(config));
}

function selectorLabels(name: string): { [key: string]: string } {
  return labels([
    ["app", "cache"],
    ["cache", name],
  ]);
}

function configMapName(name: string): string {
  return `${name}-config`;
}

function configMap(name: string, spec: Spec): KubeObject {
  const object: KubeObject = {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: objectMeta(configMapName(name), selectorLabels(name)),
  };
  if (Object.keys(spec.config).length > 0) {
    object.data = spec.config;
  }
  return object;
}

function deployment(name: string, spec: Spec, hash: string, secret: Password, replicas = spec.replicas): KubeObject {
  const selector = selectorLabels(name);
  const annotations: { [key: string]: string } = { [CONFIG_HASH_ANNOTATION]: hash };
  const container: JsonObject = {
    name: CONTAINER_NAME,
    image: spec.image,
    ports: [{ name: PORT_NAME, containerPort: spec.port }],
    volumeMounts: [{ name: CONFIG_VOLUME, mountPath: CONFIG_MOUNT_PATH, readOnly: true }],
  };
  if (secret.kind === "found") {
    annotations[SECRET_HASH_ANNOTATION] = secret.hash;
    container.env = [{ name: PASSWORD_ENV, valueFrom: { secretKeyRef: { name: secret.name, key: secret.key } } }];
  }
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: objectMeta(name, selectorLabels(name)),
    spec: {
      replicas,
      // Kubernetes' own verdict on a rollout: after this long without
      // progress the Deployment controller reports ProgressDeadlineExceeded.
      progressDeadlineSeconds: spec.upgradeTimeoutSeconds,
      selector: { matchLabels: selector },
      template: {
        metadata: { labels: selector, annotations },
        spec: {
          containers: [container],
          volumes: [{ name: CONFIG_VOLUME, configMap: { name: configMapName(name) } }],
        },
      },
    },
  };
}

function service(name: string, spec: Spec): KubeObject {
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata: objectMeta(name, selectorLabels(name)),
    spec: {
      selector: selectorLabels(name),
      ports: [{ name: PORT_NAME, port: spec.port, targetPort: spec.port }],
    },
  };
}

/** What a Deployment's spec asks for, to compare the observed one with the desired. */
interface Fingerprint {
  replicas: number | undefined;
  image: string | undefined;
  port: number | undefined;
  configHash: string | undefined;
  secretHash: string | undefined;
}

function get(object: unknown, ...path: string[]): unknown {
  let at: unknown = object;
  for (const key of path) {
    if (at === null || typeof at !== "object") {
      return undefined;
    }
    at = (at as JsonObject)[key];
  }
  return at;
}

function num(value: unknown): number | undefined {
  return typeof value === "number" ? value : undefined;
}

function fingerprintOf(observed: KubeObject): Fingerprint {
  const containers = get(observed, "spec", "template", "spec", "containers");
  const container = Array.isArray(containers)
    ? (containers as JsonObject[]).find((c) => c?.name === CONTAINER_NAME)
    : undefined;
  const hash = get(observed, "spec", "template", "metadata", "annotations", CONFIG_HASH_ANNOTATION);
  const secret = get(observed, "spec", "template", "metadata", "annotations", SECRET_HASH_ANNOTATION);
  const image = container?.image;
  return {
    replicas: num(get(observed, "spec", "replicas")),
    image: typeof image === "string" ? image : undefined,
    port: num(get(container, "ports", "0", "containerPort")),
    configHash: typeof hash === "string" ? hash : undefined,
    secretHash: typeof secret === "string" ? secret : undefined,
  };
}

function samePrint(a: Fingerprint, b: Fingerprint): boolean {
  return (
    a.replicas === b.replicas &&
    a.image === b.image &&
    a.port === b.port &&
    a.configHash === b.configHash &&
    a.secretHash === b.secretHash
  );
}

/** Whether the Deployment's controller has seen its latest generation. */
function seenLatest(observed: KubeObject): boolean {
  const seen = num(get(observed, "status", "observedGeneration"));
  const generation = observed.metadata?.generation;
  return generation === undefined ? true : seen !== undefined && seen >= generation;
}

/** Every pod runs the desired spec: seen by its controller, all updated and ready. */
function rolloutComplete(observed: KubeObject, desired: Fingerprint): boolean {
  const status = get(observed, "status");
  if (status === undefined || desired.replicas === undefined) {
    return false;
  }
  const count = (field: string) => num(get(status, field)) ?? 0;
  return (
    samePrint(fingerprintOf(observed), desired) &&
    seenLatest(observed) &&
    count("replicas") === desired.replicas &&
    count("updatedReplicas") === desired.replicas &&
    count("readyReplicas") === desired.replicas
  );
}

/**
 * The Deployment's controller, having seen its latest spec, says the rollout
 * failed: `Progressing=False`, reason `ProgressDeadlineExceeded`.
 */
function progressDeadlineExceeded(observed: KubeObject): boolean {
  const conditions = get(observed, "status", "conditions");
  return (
    get(observed, "status") !== undefined &&
    seenLatest(observed) &&
    Array.isArray(conditions) &&
    (conditions as JsonObject[]).some(
      (c) => c?.type === "Progressing" && c.status === "False" && c.reason === PROGRESS_DEADLINE_EXCEEDED,
    )
  );
}

function readyReplicas(observed: KubeObject | undefined): number {
  return num(get(observed, "status", "readyReplicas")) ?? 0;
}

/** The status to report, keeping the previous conditions' transition times. */
function statusOf(
  previous: JsonObject | undefined,
  phase: Phase,
  ready: number,
  replicas: number,
  generation: number | undefined,
  now: string,
): JsonObject {
  const conditions: Condition[] = conditionsOf(previous);
  const counts = `${ready}/${replicas} replicas ready`;
  let available: [ConditionStatus, string];
  if (phase === "Pending") {
    available = ["False", "DeploymentPending"];
  } else if (ready > 0) {
    available = ["True", "ReplicasAvailable"];
  } else {
    available = ["False", "NoReplicasAvailable"];
  }
  const progressing: [ConditionStatus, string, string] = {
    Pending: ["True", "Creating", "creating the Deployment, Service and ConfigMap"] as [ConditionStatus, string, string],
    Progressing: ["True", "RollingOut", counts] as [ConditionStatus, string, string],
    Degraded: ["True", "RollingOut", counts] as [ConditionStatus, string, string],
    Ready: ["False", "RolloutComplete", counts] as [ConditionStatus, string, string],
    Paused: ["Unknown", "Paused", "spec.paused is true: children are left as they are"] as [
      ConditionStatus,
      string,
      string,
    ],
  }[phase];
  setCondition(conditions, "Available", available[0], available[1], counts, generation, now);
  setCondition(conditions, "Progressing", progressing[0], progressing[1], progressing[2], generation, now);
  const status: JsonObject = { readyReplicas: ready, phase };
  for (const key of ["lastGoodImage", "failedImage"]) {
    if (typeof previous?.[key] === "string") {
      status[key] = previous[key];
    }
  }
  if (conditions.length > 0) {
    status.conditions = conditions;
  }
  return status;
}

/** Where a Cache's image stands (the Rust guest's `upgrade::Upgrade`). */
type Upgrade =
  | { kind: "none" }
  | { kind: "rollingOut"; from: string; to: string }
  | { kind: "completed"; from: string; to: string }
  | { kind: "rollBack"; failed: string; to: string }
  | { kind: "heldBack"; to: string };

function stringAt(status: JsonObject | undefined, key: string): string | undefined {
  const value = status?.[key];
  return typeof value === "string" ? value : undefined;
}

/** The last good image while `image` is the one that failed; `undefined` otherwise. */
function heldImage(image: string, status: JsonObject | undefined): string | undefined {
  return stringAt(status, "failedImage") === image ? stringAt(status, "lastGoodImage") : undefined;
}

/** Decides where `image` (`spec.image`) stands; `wanted` is the Deployment running it. */
function decideUpgrade(
  image: string,
  status: JsonObject | undefined,
  observed: KubeObject | undefined,
  wanted: Fingerprint,
): Upgrade {
  const good = stringAt(status, "lastGoodImage");
  if (good === undefined || image === good) {
    return { kind: "none" };
  }
  const held = heldImage(image, status);
  if (held !== undefined) {
    return { kind: "heldBack", to: held };
  }
  if (observed !== undefined && rolloutComplete(observed, wanted)) {
    return { kind: "completed", from: good, to: image };
  }
  if (observed !== undefined && fingerprintOf(observed).image === image && progressDeadlineExceeded(observed)) {
    return { kind: "rollBack", failed: image, to: good };
  }
  return { kind: "rollingOut", from: good, to: image };
}

/** The image the Deployment runs instead of `spec.image` after a rollback. */
function heldAt(upgrade: Upgrade): string | undefined {
  return upgrade.kind === "rollBack" || upgrade.kind === "heldBack" ? upgrade.to : undefined;
}

/** The phase to report over the Deployment's own `rollout` phase. */
function upgradePhase(upgrade: Upgrade, rollout: Phase, ready: number, replicas: number): Phase {
  if (upgrade.kind === "rollingOut" && ready >= replicas) {
    return "Ready";
  }
  if (upgrade.kind === "rollBack" || upgrade.kind === "heldBack") {
    return "Degraded";
  }
  return rollout;
}

/**
 * Brings `lastGoodImage`, `failedImage`, `Upgrading` and `Upgraded` of
 * `status` up to date; the Event of an upgrade that ended now, if any.
 */
function reportUpgrade(
  upgrade: Upgrade,
  status: JsonObject,
  image: string,
  rollout: Phase,
  generation: number | undefined,
  timeout: number,
  now: string,
): [string, string, string] | undefined {
  const conditions = status.conditions as Condition[];
  const set = (type: string, state: boolean, reason: string, message: string) =>
    setCondition(conditions, type, state ? "True" : "False", reason, message, generation, now);
  switch (upgrade.kind) {
    case "none": {
      if (rollout === "Ready" && status.lastGoodImage === undefined) {
        status.lastGoodImage = image;
      }
      if (status.lastGoodImage === image) {
        delete status.failedImage;
      }
      if (findCondition(conditions, "Upgrading")?.status === "True") {
        set("Upgrading", false, "Cancelled", `spec.image is ${image} again`);
      }
      return undefined;
    }
    case "rollingOut":
      delete status.failedImage;
      set("Upgrading", true, "RollingOut", `${upgrade.from} -> ${upgrade.to}`);
      return undefined;
    case "completed": {
      const message = `${upgrade.from} -> ${upgrade.to}`;
      delete status.failedImage;
      status.lastGoodImage = upgrade.to;
      set("Upgrading", false, "Upgraded", message);
      set("Upgraded", true, "Upgraded", message);
      return ["normal", "Upgraded", `upgraded from ${upgrade.from} to ${upgrade.to}: every replica is Ready`];
    }
    case "rollBack": {
      const message = `the rollout of ${upgrade.failed} made no progress for ${timeout} s (${PROGRESS_DEADLINE_EXCEEDED}); rolled back to ${upgrade.to}`;
      status.failedImage = upgrade.failed;
      set("Upgrading", false, "RolledBack", message);
      set("Upgraded", false, "RolledBack", message);
      return ["warning", "UpgradeRolledBack", message];
    }
    case "heldBack":
      return undefined;
  }
}

function phaseEvent(previous: JsonObject | undefined, phase: Phase): [string, string][] {
  const before = typeof previous?.phase === "string" ? previous.phase : undefined;
  if (before === phase) {
    return [];
  }
  return [["PhaseChanged", before === undefined ? `phase is ${phase}` : `phase changed from ${before} to ${phase}`]];
}

function changeEvents(name: string, observed: KubeObject | undefined, wanted: Fingerprint): [string, string][] {
  if (observed === undefined) {
    return [["Created", `creating Deployment ${name}, Service ${name} and ConfigMap ${name}-config`]];
  }
  const was = fingerprintOf(observed);
  const events: [string, string][] = [];
  if (was.replicas !== wanted.replicas) {
    events.push(["Scaled", `scaling Deployment ${name} from ${was.replicas ?? 0} to ${wanted.replicas ?? 0} replicas`]);
  }
  if (was.image !== wanted.image) {
    events.push([
      "ImageChanged",
      `updating Deployment ${name} from image ${was.image ?? "(none)"} to ${wanted.image ?? "(none)"}`,
    ]);
  }
  if (was.configHash !== wanted.configHash) {
    events.push(["ConfigChanged", `the config changed; rolling the pods of Deployment ${name}`]);
  }
  if (was.secretHash !== wanted.secretHash) {
    events.push(["SecretChanged", `the password Secret changed; rolling the pods of Deployment ${name}`]);
  }
  return events;
}

/** Scales the Deployment down; `finalized` once no pod is left. */
function stop(request: Request, name: string, spec: Spec): Response {
  const isDeployment = (ref: ObjectRef) => ref.apiVersion === "apps/v1" && ref.kind === "Deployment" && ref.name === name;
  const response = new Response().keepObserved(request, isDeployment);
  const observed = request.observedNamed(kinds.deployment, name);
  if (observed === undefined) {
    return response.finalize().normal("CleanupComplete", `no Deployment ${name} left; the Cache can go`);
  }
  const ref: ObjectRef = { apiVersion: "apps/v1", kind: "Deployment", name };
  const pods = num(get(observed, "status", "replicas")) ?? 0;
  if (pods === 0) {
    return response
      .keep(ref)
      .finalize()
      .normal("CleanupComplete", `all pods of Deployment ${name} have stopped; the Cache can go`);
  }
  try {
    validate(spec);
  } catch (e) {
    return response
      .keep(ref)
      .finalize()
      .warning(
        "CleanupSkipped",
        `cannot scale Deployment ${name} down (${e instanceof Error ? e.message : String(e)}); the garbage collector removes it with the Cache`,
      );
  }
  // The image the Deployment runs: after a rollback, not the spec's.
  const held = heldImage(spec.image, request.status);
  const running = held === undefined ? spec : { ...spec, image: held };
  response.child(deployment(name, running, configHash(spec.config), password(request, spec.auth), 0));
  const wanted = fingerprintOf(observed).replicas ?? 0;
  return wanted === 0
    ? response.requeueAfter(POLL_SECONDS).normal("CleanupWaiting", `waiting for ${pods} pod(s) of Deployment ${name} to stop`)
    : response
        .requeueAfter(POLL_SECONDS)
        .normal("CleanupStarted", `scaling Deployment ${name} from ${wanted} to 0 replicas before deletion`);
}

/**
 * The answer for a Cache with a deletionTimestamp: `stop`, and once it is
 * finalized, the Cache taken out of its registry (`registryUrl`) if it may
 * be in it; while that fails every child is kept and the Cache stays.
 */
function reconcileDeletion(
  request: Request,
  cache: KubeObject,
  name: string,
  spec: Spec,
  registry: Registry | undefined,
): Response {
  const answer = stop(request, name, spec);
  if (!answer.toWire().finalized || registry === undefined) {
    return answer;
  }
  const outcome = registry.deregister(statusObject(cache), request.now);
  switch (outcome.kind) {
    case "notRegistered":
      return answer;
    case "removed":
      return answer.normal("Deregistered", `removed Cache ${name} from its registry`).status(outcome.status);
    case "blocked": {
      const blocked = new Response().keepObserved(request);
      if (outcome.event !== undefined) {
        blocked.warning(outcome.event[1], outcome.event[2]);
      }
      return blocked.requeueAfter(outcome.retryAfter).status(outcome.status);
    }
  }
}

function reconcilePaused(request: Request, cache: KubeObject, name: string, spec: Spec): Response {
  const response = new Response().keepObserved(request);
  const previous = statusObject(cache);
  for (const [reason, message] of phaseEvent(previous, "Paused")) {
    response.normal(reason, message);
  }
  return response.status(
    statusOf(
      previous,
      "Paused",
      readyReplicas(request.observedNamed(kinds.deployment, name)),
      spec.replicas,
      request.generation,
      request.now,
    ),
  );
}

/** The Cache's status, if it has one. */
function statusObject(cache: KubeObject): JsonObject | undefined {
  const status = cache.status;
  return status !== null && typeof status === "object" && !Array.isArray(status) ? (status as JsonObject) : undefined;
}

/**
 * The answer while the Secret or key `spec.auth.secretRef` names is missing:
 * every observed child kept as it is, phase `Pending` with `SecretMissing`,
 * and a Warning Event when the Cache did not report it already.
 */
function reconcileSecretMissing(request: Request, cache: KubeObject, name: string, message: string): Response {
  const response = new Response().keepObserved(request);
  const previous = statusObject(cache);
  const conditions = conditionsOf(previous);
  const reported = findCondition(conditions, "Available")?.reason === SECRET_MISSING;
  for (const type of ["Available", "Progressing"]) {
    setCondition(conditions, type, "False", SECRET_MISSING, message, request.generation, request.now);
  }
  const status: JsonObject = {
    readyReplicas: readyReplicas(request.observedNamed(kinds.deployment, name)),
    phase: "Pending",
  };
  for (const key of ["lastGoodImage", "failedImage"]) {
    if (typeof previous?.[key] === "string") {
      status[key] = previous[key];
    }
  }
  status.conditions = conditions;
  if (!reported) {
    log.info(`cache ${name}: ${message}`);
    response.warning(SECRET_MISSING, message);
  }
  for (const [reason, text] of phaseEvent(previous, "Pending")) {
    response.normal(reason, text);
  }
  return response.status(status);
}

/** Condition reason: the Secret or key `spec.auth.secretRef` names is missing. */
const SECRET_MISSING = "SecretMissing";

/** The parent in the v1alpha1 shape the logic is written for. */
function parentOf(request: Request, settings: Settings): KubeObject {
  if (versionOf(settings) === V1ALPHA1) {
    return request.parent;
  }
  const apiVersion = typeof request.parent.apiVersion === "string" ? request.parent.apiVersion : "";
  const group = apiVersion.includes("/") ? apiVersion.slice(0, apiVersion.indexOf("/")) : "";
  try {
    return convert(JSON.parse(JSON.stringify(request.parent)) as JsonObject, `${group}/${V1ALPHA1}`);
  } catch (e) {
    throw GuestError.permanent(e instanceof Error ? e.message : String(e));
  }
}

/** The registry of `cache`, with the setting `registryUrl`. */
function registryOf(settings: Settings, cache: KubeObject, name: string, spec: Spec): Registry | undefined {
  if (settings.registryUrl === undefined) {
    return undefined;
  }
  const namespace = cache.metadata?.namespace ?? "default";
  return new Registry(settings.registryUrl, name, namespace, spec.port, cache.metadata?.generation);
}

/** One reconcile of a Cache. */
export function reconcile(request: Request): Response {
  let settings: Settings;
  try {
    settings = parseSettings(request.settings);
  } catch (e) {
    throw GuestError.permanent(e instanceof Error ? e.message : String(e));
  }
  const cache = parentOf(request, settings);
  const name = cache.metadata?.name ?? "";
  if (name === "") {
    throw GuestError.permanent("the Cache has no metadata.name");
  }
  const spec = specOf(cache, settings);
  // Deletion first: a paused or invalid Cache must still be deletable.
  if (request.deleting) {
    return reconcileDeletion(request, cache, name, spec, registryOf(settings, cache, name, spec));
  }
  if (spec.paused) {
    return reconcilePaused(request, cache, name, spec);
  }
  validate(spec);
  const secret = password(request, spec.auth);
  if (secret.kind === "missing") {
    return reconcileSecretMissing(request, cache, name, secret.message);
  }
  const hash = configHash(spec.config);
  const secretHash = secret.kind === "found" ? secret.hash : undefined;
  const printOf = (s: Spec): Fingerprint => ({
    replicas: s.replicas,
    image: s.image,
    port: s.port,
    configHash: hash,
    secretHash,
  });
  const observed = request.observedNamed(kinds.deployment, name);
  const previous = statusObject(cache);
  const upgrade = decideUpgrade(spec.image, previous, observed, printOf(spec));
  // After a rollback the Deployment runs the last good image, not the
  // spec's: the spec is the user's and stays as it is.
  const held = heldAt(upgrade);
  const running: Spec = held === undefined ? spec : { ...spec, image: held };
  const wanted = printOf(running);
  const rollout: Phase =
    observed === undefined ? "Pending" : rolloutComplete(observed, wanted) ? "Ready" : "Progressing";
  const ready = readyReplicas(observed);
  const status = statusOf(previous, rollout, ready, spec.replicas, request.generation, request.now);
  const upgradeEvent = reportUpgrade(
    upgrade,
    status,
    spec.image,
    rollout,
    request.generation,
    spec.upgradeTimeoutSeconds,
    request.now,
  );
  const phase = upgradePhase(upgrade, rollout, ready, spec.replicas);
  status.phase = phase;
  let registryEvent: [string, string, string] | undefined;
  let requeue: number | undefined;
  const registry = registryOf(settings, cache, name, spec);
  if (phase === "Ready" && registry !== undefined) {
    [registryEvent, requeue] = registry.register(status, request.now);
  }
  const response = new Response();
  const events: [string, string, string][] = [
    ...(registryEvent === undefined ? [] : [registryEvent]),
    ...changeEvents(name, observed, wanted).map(([r, m]): [string, string, string] => ["normal", r, m]),
    ...(upgradeEvent === undefined ? [] : [upgradeEvent]),
    ...phaseEvent(previous, phase).map(([r, m]): [string, string, string] => ["normal", r, m]),
  ];
  for (const [type, reason, message] of events) {
    log.info(`cache ${name}: ${reason}: ${message}`);
    if (type === "warning") {
      response.warning(reason, message);
    } else {
      response.normal(reason, message);
    }
  }
  if (requeue !== undefined) {
    response.requeueAfter(requeue);
  }
  return response
    .child(configMap(name, running))
    .child(deployment(name, running, hash, secret))
    .child(service(name, running))
    .status(status);
}

/** The Cache operator: reconcile, admission and conversion. */
export const CacheOperator: Operator & Admission & Conversion = {
  describe(value: unknown) {
    const settings = parseSettings(value);
    return new DescriptionBuilder(kindRef(settings.apiGroup ?? GROUP, versionOf(settings), "Cache"))
      .relatedByName(kinds.secret, SECRET_NAME_POINTER)
      .child(kinds.configMap)
      .child(kinds.deployment)
      .child(kinds.service)
      .finalizer(FINALIZER)
      .build();
  },
  reconcile,
  admit(review: Review): AdmissionResponse {
    return admit(review);
  },
  convert(object: JsonObject, desiredApiVersion: string): JsonObject {
    return convert(object, desiredApiVersion);
  },
};
