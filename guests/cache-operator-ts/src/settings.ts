// The guest-list entry's `settings` for the cache-operator (the Rust guest's
// `CacheSettings`): `defaultImage`, `apiGroup`, `version` and `registryUrl`.

import { httpBuild, type JsonObject } from "../../sdk-ts/src/index.ts";
import { V1ALPHA1, V1BETA1 } from "./conversion.ts";

/** The checked settings. */
export interface Settings {
  /** The image of a Cache whose `spec.image` is empty. */
  defaultImage?: string;
  /** The API group of the Cache kind to reconcile (default `apps.example.com`). */
  apiGroup?: string;
  /**
   * The Cache version the guest reconciles: `v1alpha1` (default) or
   * `v1beta1`, the storage version of the CRD with both.
   */
  version?: string;
  /**
   * An external registry every Ready Cache is registered with (`registry.ts`);
   * only the build with outbound HTTP (`cache-operator-ts-registry`) takes it.
   */
  registryUrl?: string;
}

const KEYS = ["defaultImage", "apiGroup", "version", "registryUrl"] as const;

/** The settings, checked: unknown keys and empty values are refused. */
export function parseSettings(value: unknown): Settings {
  if (value === undefined || value === null) {
    return {};
  }
  if (typeof value !== "object" || Array.isArray(value)) {
    throw new Error("settings must be a map");
  }
  const settings: Settings = {};
  for (const [key, v] of Object.entries(value as JsonObject)) {
    if (!(KEYS as readonly string[]).includes(key)) {
      throw new Error(`unknown setting ${JSON.stringify(key)}, expected one of ${KEYS.join(", ")}`);
    }
    if (typeof v !== "string") {
      throw new Error(`settings.${key} must be a string`);
    }
    settings[key as (typeof KEYS)[number]] = v;
  }
  if (settings.defaultImage !== undefined && settings.defaultImage.trim() === "") {
    throw new Error("settings.defaultImage must not be empty");
  }
  const group = settings.apiGroup;
  if (group !== undefined && (!group.includes(".") || group.length > 253 || !/^[a-z0-9.-]+$/.test(group))) {
    throw new Error(`settings.apiGroup ${JSON.stringify(group)} is not an API group (a lowercase DNS name with a dot)`);
  }
  const version = settings.version;
  if (version !== undefined && version !== V1ALPHA1 && version !== V1BETA1) {
    throw new Error(`settings.version ${JSON.stringify(version)} is not a Cache version (v1alpha1 or v1beta1)`);
  }
  const url = settings.registryUrl;
  if (url !== undefined && httpBuild === "log-only") {
    throw new Error(
      "settings.registryUrl needs the cache-operator-ts-registry build, which imports outbound HTTP",
    );
  }
  if (
    url !== undefined &&
    !(/^https?:\/\/./.test(url) && !/[?#@]/.test(url))
  ) {
    throw new Error(
      `settings.registryUrl ${JSON.stringify(url)} must be an http:// or https:// URL without user info or query`,
    );
  }
  return settings;
}

/** The Cache version reconciled: `version`, default `v1alpha1`. */
export function versionOf(settings: Settings): string {
  return settings.version ?? V1ALPHA1;
}
