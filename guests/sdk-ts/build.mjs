#!/usr/bin/env node
// Builds and tests wasmop guests written in TypeScript.
//
//   node build.mjs component <entry.ts> --out <guest.wasm> [--http] [--wit <dir>] [--project <dir>]
//   node build.mjs test <file.test.ts>... [--project <dir>]
//   node build.mjs hooks <entry.js> --wit <dir> --out <guest.wasm> [--project <dir>]
//
// Both first check that the WIT is the contract this SDK is written for
// (`CONTRACT`, the `package` line of `operator.wit`) and stop otherwise.
//
// `component`:
// 1. generates the WIT's TypeScript types into `generated/` beside this file
//    (`jco guest-types`);
// 2. type-checks the project with `tsc --noEmit` (its `tsconfig.json`);
// 3. bundles the entry and everything it imports into one ES module
//    (esbuild; the WIT's own modules `wasmop:*` and `wasi:*` stay imports), and reads
//    which of `operator`, `admission` and `conversion` it exports: the
//    world is `operator-guest`, `admission-guest`, `conversion-guest` or
//    `webhook-guest` accordingly;
// 4. makes the component with componentize-js, every WASI feature disabled;
//    with `--http` its world also imports `wasi:http/outgoing-handler@0.2.12`
//    (the SDK's `send`), the WASI WIT taken from the pinned jco
//    (`lib/wit/builtin/0.2.12`); without, the SDK's `wasi:http` imports are
//    bundled as a stub and requests fail as unavailable;
// 5. checks with `wasm-tools component wit` (jco's `componentWit`) that the
//    component imports exactly the WIT's `log` (and its types), and with
//    `--http` exactly those and `wasi:http/outgoing-handler`, `wasi:http/types`
//    and the `wasi:io` and `wasi:clocks` interfaces they use.
// `hooks` makes a Metacontroller hook guest from the entry `wasmop
// metacontroller build` generates (`exportHooks` of `src/metacontroller.ts`
// around the hook files): it bundles the entry (a hook file that does not
// parse or resolve is refused here), makes the component of the world
// `hook-guest` of `--wit` (`wit/metacontroller@0.1.0`, whose package line
// must be `HOOKS_CONTRACT`) and checks that it imports nothing.
// `test` type-checks, bundles each test file for Node.js with a `log` that
// prints (and no outbound HTTP), and runs them with `node --test`.
//
// The tools (componentize-js, jco, esbuild, typescript, pinned in this
// directory's package.json) are resolved from `$WASMOP_NODE_TOOLS` (a
// directory holding their `node_modules`, where `cargo xtask build-guests`
// installs them) or else from the project's own `node_modules`, which
// `npm install` fills on the first build.

import { spawnSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const SDK_DIR = dirname(fileURLToPath(import.meta.url));
/** The WIT package this SDK is written for; another version is refused. */
const CONTRACT = "wasmop:operator@0.1.0";
/** The WIT package of a Metacontroller hook guest. */
const HOOKS_CONTRACT = "wasmop:metacontroller@0.1.0";
/** The `wasi:http` version an `--http` guest imports (WASI 0.2). */
const WASI_VERSION = "0.2.12";
/** The WASI packages `wasi:http` needs, as jco ships their WIT. */
const WASI_PACKAGES = ["wasi-io", "wasi-clocks", "wasi-random", "wasi-cli", "wasi-filesystem", "wasi-sockets", "wasi-http"];
/** What every TypeScript guest imports: the WIT's `log` (and its types). */
const LOG_IMPORTS = ["wasmop:operator/log@0.1.0", "wasmop:operator/types@0.1.0"];
/**
 * What a guest built with `--http` imports besides: `fetch` over
 * `wasi:http`, and the `wasi:io` streams and polls it uses (any 0.2 version).
 */
const HTTP_IMPORTS = [
  `wasi:http/outgoing-handler@${WASI_VERSION}`,
  `wasi:http/types@${WASI_VERSION}`,
  `wasi:io/error@${WASI_VERSION}`,
  `wasi:io/poll@${WASI_VERSION}`,
  `wasi:io/streams@${WASI_VERSION}`,
  `wasi:clocks/monotonic-clock@${WASI_VERSION}`,
];
/** componentize-js's WASI features: all off, so nothing but `log` is imported. */
const DISABLED_FEATURES = ["stdio", "random", "clocks", "http", "fetch-event"];

function fail(message) {
  console.error(`build.mjs: ${message}`);
  process.exit(1);
}

function parseArgs(argv) {
  const [mode, ...rest] = argv;
  const options = { files: [], out: undefined, wit: undefined, project: process.cwd(), http: false };
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i];
    if (arg === "--http") {
      options.http = true;
    } else if (arg === "--out" || arg === "--wit" || arg === "--project") {
      const value = rest[++i];
      if (value === undefined) fail(`${arg} needs a value`);
      options[arg.slice(2)] = resolve(value);
    } else if (arg.startsWith("--")) {
      fail(`unknown option ${arg}`);
    } else {
      options.files.push(resolve(arg));
    }
  }
  return { mode, options };
}

/** The directory whose `node_modules` holds the pinned tools. */
function toolsRoot(project) {
  return process.env.WASMOP_NODE_TOOLS ? resolve(process.env.WASMOP_NODE_TOOLS) : project;
}

/**
 * Runs `npm install` in the project when the tools are neither given by
 * `$WASMOP_NODE_TOOLS` nor installed there yet (a generated project's first
 * build).
 */
function ensureTools(project) {
  if (process.env.WASMOP_NODE_TOOLS) return;
  try {
    readFileSync(join(project, "node_modules", "@bytecodealliance", "componentize-js", "package.json"));
    return;
  } catch {
    // not installed yet
  }
  console.error(`--> installing the pinned tools into ${join(project, "node_modules")} (npm install, once)`);
  const npm = process.platform === "win32" ? "npm.cmd" : "npm";
  const result = spawnSync(npm, ["install", "--no-audit", "--no-fund"], { cwd: project, stdio: "inherit" });
  if (result.status !== 0) fail("npm install failed");
}

/** `require` that finds the pinned tools. */
function toolRequire(project) {
  return createRequire(join(toolsRoot(project), "package.json"));
}

/** The ES module entry of the tool package `name` (its `exports` may hide it from `require`). */
function toolEntry(project, name) {
  const dir = join(toolsRoot(project), "node_modules", name);
  let manifest;
  try {
    manifest = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
  } catch {
    fail(`${name} is not installed in ${toolsRoot(project)}: run \`cargo xtask build-guests\` or \`npm install\``);
  }
  const root = manifest.exports?.["."] ?? manifest.exports;
  const entry =
    typeof root === "string" ? root : (root?.import ?? root?.default ?? manifest.module ?? manifest.main ?? "index.js");
  return pathToFileURL(join(dir, typeof entry === "string" ? entry : entry.default)).href;
}

async function importTool(project, name) {
  return import(toolEntry(project, name));
}

/**
 * The WIT directory: `--wit`, else `wit/` in the project, else the
 * repository's released version the SDK builds against.
 */
function witDir(options) {
  if (options.wit) return options.wit;
  for (const candidate of [
    join(options.project, "wit"),
    resolve(SDK_DIR, "../../wit/operator@0.1.0"),
  ]) {
    try {
      readFileSync(join(candidate, "operator.wit"));
      return candidate;
    } catch {
      // next
    }
  }
  fail("no wit/operator.wit found: pass --wit <dir>");
}

/**
 * The WIT directory, checked to be the contract this SDK is written for:
 * `operator.wit`'s `package` line must name `CONTRACT`.
 */
function contractWit(options) {
  const wit = witDir(options);
  const text = readFileSync(join(wit, "operator.wit"), "utf8");
  const found = /^\s*package\s+([^;\s]+)\s*;/m.exec(text)?.[1];
  if (found !== CONTRACT) {
    fail(
      `${join(wit, "operator.wit")} is the contract ${found ?? "(no package line)"}, but this SDK is written for ${CONTRACT}: ` +
        "build with the SDK of that contract version, or against the WIT this SDK came with",
    );
  }
  return wit;
}

/** The world of a guest whose entry exports `names`. */
function worldOf(names) {
  if (!names.includes("operator")) {
    fail(`the entry exports ${names.join(", ") || "nothing"}, not \`operator\` (exportOperator)`);
  }
  const admission = names.includes("admission");
  const conversion = names.includes("conversion");
  if (admission && conversion) return "webhook-guest";
  if (admission) return "admission-guest";
  if (conversion) return "conversion-guest";
  return "operator-guest";
}

/** Whether `imports` is exactly what a guest of this flavor imports. */
function unexpectedImports(imports, http) {
  const expected = http ? [...LOG_IMPORTS, ...HTTP_IMPORTS] : LOG_IMPORTS;
  const extra = imports.filter((name) => !expected.includes(name));
  const missing = expected.filter((name) => !imports.includes(name));
  return { extra, missing };
}

/**
 * A WIT directory whose world `guest` is `world` of the contract in `wit`
 * and `wasi:http/outgoing-handler`, the WASI packages from the pinned jco as
 * its dependencies; the caller removes it.
 */
function httpWit(project, wit, world) {
  const wasi = join(toolsRoot(project), "node_modules", "@bytecodealliance", "jco", "lib", "wit", "builtin", WASI_VERSION);
  const staging = mkdtempSync(join(tmpdir(), "wasmop-ts-wit-"));
  mkdirSync(join(staging, "deps", "wasmop-operator"), { recursive: true });
  cpSync(join(wit, "operator.wit"), join(staging, "deps", "wasmop-operator", "operator.wit"));
  for (const name of WASI_PACKAGES) {
    try {
      cpSync(join(wasi, name), join(staging, "deps", name), { recursive: true });
    } catch {
      rmSync(staging, { recursive: true, force: true });
      fail(`the pinned jco has no WASI ${WASI_VERSION} WIT ${name} in ${wasi}`);
    }
  }
  const version = CONTRACT.split("@")[1];
  writeFileSync(
    join(staging, "guest.wit"),
    `package wasmop:guest-build;\n\nworld guest {\n  include wasmop:operator/${world}@${version};\n  import wasi:http/outgoing-handler@${WASI_VERSION};\n}\n`,
  );
  return staging;
}

/**
 * esbuild plugin for a build without `--http`: the SDK's `wasi:http`
 * imports become a module that refuses to be used (the SDK checks
 * `httpAvailable` first), so the component imports no `wasi:http`.
 */
const noHttp = {
  name: "wasmop-no-http",
  setup(build) {
    build.onResolve({ filter: /^wasi:http\// }, (args) => ({ path: args.path, namespace: "wasmop-no-http" }));
    build.onLoad({ filter: /.*/, namespace: "wasmop-no-http" }, () => ({
      contents: [
        "const unavailable = () => { throw new Error('outbound HTTP is unavailable in this build'); };",
        "export const handle = unavailable;",
        "export class Fields { constructor() { unavailable(); } }",
        "export class OutgoingRequest { constructor() { unavailable(); } }",
        "export class OutgoingBody { static finish() { unavailable(); } }",
        "export class IncomingBody { static finish() { unavailable(); } }",
      ].join("\n"),
      loader: "js",
    }));
  },
};

/** Generates the TypeScript types of every export and of `wasi:http`. */
async function generateTypes(require, project, wit) {
  // jco-transpile runs its WIT reader as a component on preview2-shim, whose
  // filesystem has no preopens until they are set: give it the host's root.
  const transpile = require.resolve("@bytecodealliance/jco-transpile");
  const shimPath = createRequire(transpile).resolve("@bytecodealliance/preview2-shim/filesystem");
  const shim = await import(pathToFileURL(shimPath).href);
  shim._setPreopens({ "/": "/" });
  const { generateGuestTypes } = await import(pathToFileURL(transpile).href);
  const out = join(SDK_DIR, "generated");
  const staging = httpWit(project, wit, "webhook-guest");
  let files;
  try {
    files = await generateGuestTypes(staging, { worldName: "guest", outDir: `${out}/` });
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
  rmSync(out, { recursive: true, force: true });
  for (const [path, bytes] of Object.entries(files)) {
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, bytes);
  }
  console.error(`--> WIT types: ${Object.keys(files).length} files in ${out}`);
}

function typecheck(require, project) {
  const tsc = require.resolve("typescript/bin/tsc");
  // `@types/node` (for tests) comes with the tools.
  const typeRoots = join(dirname(require.resolve("@types/node/package.json")), "..");
  const result = spawnSync(process.execPath, [tsc, "--noEmit", "-p", project, "--typeRoots", typeRoots], {
    stdio: "inherit",
  });
  if (result.status !== 0) fail(`tsc found type errors in ${project}`);
  console.error("--> type-checked");
}

/**
 * Bundles `entry` into `outfile`; returns the names the bundle exports. A
 * component's bundle ("neutral") learns whether it has outbound HTTP
 * (`__WASMOP_HTTP__`); a test bundle ("node") does not.
 */
async function bundle(project, entry, outfile, platform, plugins = [], http = false) {
  const esbuild = await importTool(project, "esbuild");
  const result = await esbuild.build({
    entryPoints: [entry],
    outfile,
    bundle: true,
    format: "esm",
    platform,
    target: "es2022",
    external: platform === "neutral" ? ["wasmop:*", "wasi:*"] : [],
    plugins,
    define: platform === "neutral" ? { __WASMOP_HTTP__: http ? "true" : "false" } : {},
    metafile: true,
    logLevel: "warning",
  });
  return Object.values(result.metafile.outputs)[0]?.exports ?? [];
}

async function component(options) {
  const [entry] = options.files;
  if (!entry || !options.out) fail("usage: build.mjs component <entry.ts> --out <guest.wasm> [--http]");
  const wit = contractWit(options);
  ensureTools(options.project);
  const require = toolRequire(options.project);
  await generateTypes(require, options.project, wit);
  typecheck(require, options.project);
  const work = mkdtempSync(join(tmpdir(), "wasmop-ts-"));
  try {
    const js = join(work, `${basename(entry, ".ts")}.js`);
    const plugins = options.http ? [] : [noHttp];
    const world = worldOf(await bundle(options.project, entry, js, "neutral", plugins, options.http));
    console.error(`--> bundled ${entry}: world ${world}${options.http ? ", with outbound HTTP" : ""}`);
    const { componentize } = await importTool(options.project, "@bytecodealliance/componentize-js");
    const started = Date.now();
    const staging = options.http ? httpWit(options.project, wit, world) : undefined;
    let bytes;
    try {
      ({ component: bytes } = await componentize({
        sourcePath: js,
        witPath: staging ?? wit,
        worldName: staging === undefined ? world : "guest",
        disableFeatures: DISABLED_FEATURES,
      }));
    } finally {
      if (staging !== undefined) rmSync(staging, { recursive: true, force: true });
    }
    console.error(`--> componentized in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    const { componentWit } = await importTool(options.project, "@bytecodealliance/jco");
    const printed = await componentWit(bytes);
    const imports = [...printed.matchAll(/^\s*import ([^;]+);/gm)].map((m) => m[1].trim());
    const { extra, missing } = unexpectedImports(imports, options.http);
    const flavor = options.http ? "the WIT's log and outbound HTTP" : "the WIT's log";
    if (extra.length > 0) fail(`the component imports more than ${flavor}: ${extra.join(", ")}`);
    if (missing.length > 0) fail(`the component does not import all of ${flavor}: missing ${missing.join(", ")}`);
    mkdirSync(dirname(options.out), { recursive: true });
    writeFileSync(options.out, bytes);
    console.error(
      `--> ${options.out} (${Math.ceil(bytes.length / 1024)} KiB), imports: ${imports.join(", ") || "none"}`,
    );
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

async function hooks(options) {
  const [entry] = options.files;
  if (!entry || !options.out || !options.wit) fail("usage: build.mjs hooks <entry.js> --wit <dir> --out <guest.wasm>");
  const text = readFileSync(join(options.wit, "hooks.wit"), "utf8");
  const found = /^\s*package\s+([^;\s]+)\s*;/m.exec(text)?.[1];
  if (found !== HOOKS_CONTRACT) fail(`${join(options.wit, "hooks.wit")} is ${found ?? "(no package line)"}, not ${HOOKS_CONTRACT}`);
  ensureTools(options.project);
  const work = mkdtempSync(join(tmpdir(), "wasmop-hooks-"));
  try {
    const js = join(work, "hooks.js");
    const names = await bundle(options.project, entry, js, "neutral");
    if (!names.includes("hooks")) fail(`${entry} does not export \`hooks\` (exportHooks)`);
    const { componentize } = await importTool(options.project, "@bytecodealliance/componentize-js");
    const started = Date.now();
    const { component: bytes } = await componentize({
      sourcePath: js,
      witPath: options.wit,
      worldName: "hook-guest",
      disableFeatures: DISABLED_FEATURES,
    });
    console.error(`--> componentized in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    const { componentWit } = await importTool(options.project, "@bytecodealliance/jco");
    const printed = await componentWit(bytes);
    const imports = [...printed.matchAll(/^\s*import ([^;]+);/gm)].map((m) => m[1].trim());
    if (imports.length > 0) fail(`a hook guest imports nothing, but this one imports ${imports.join(", ")}`);
    mkdirSync(dirname(options.out), { recursive: true });
    writeFileSync(options.out, bytes);
    console.error(`--> ${options.out} (${Math.ceil(bytes.length / 1024)} KiB), imports: none`);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** esbuild plugin: the WIT's `log` as console output, for tests under Node.js. */
const logForNode = {
  name: "wasmop-log",
  setup(build) {
    build.onResolve({ filter: /^wasmop:operator\/log@/ }, (args) => ({ path: args.path, namespace: "wasmop" }));
    build.onLoad({ filter: /.*/, namespace: "wasmop" }, () => ({
      contents: "export function log(level, message) { console.error(`[${level}] ${message}`); }",
      loader: "js",
    }));
  },
};

async function test(options) {
  if (options.files.length === 0) fail("usage: build.mjs test <file.test.ts>...");
  const wit = contractWit(options);
  ensureTools(options.project);
  const require = toolRequire(options.project);
  await generateTypes(require, options.project, wit);
  typecheck(require, options.project);
  const work = mkdtempSync(join(tmpdir(), "wasmop-ts-test-"));
  try {
    const bundles = [];
    for (const file of options.files) {
      const out = join(work, `${basename(file, ".ts")}.mjs`);
      await bundle(options.project, file, out, "node", [logForNode, noHttp]);
      bundles.push(out);
    }
    const result = spawnSync(process.execPath, ["--test", ...bundles], { stdio: "inherit" });
    if (result.status !== 0) fail("tests failed");
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

const { mode, options } = parseArgs(process.argv.slice(2));
if (mode === "component") {
  await component(options);
} else if (mode === "test") {
  await test(options);
} else if (mode === "hooks") {
  await hooks(options);
} else {
  fail(
    "usage: build.mjs component <entry.ts> --out <guest.wasm> [--http] | build.mjs test <file.test.ts>... | build.mjs hooks <entry.js> --wit <dir> --out <guest.wasm>",
  );
}
