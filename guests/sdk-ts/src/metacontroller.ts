// Metacontroller's JavaScript hooks, called in-process: the adapter that
// `wasmop metacontroller build` puts around the hook files of a
// controller's hooks folder. It exports the WIT `wasmop:metacontroller/hooks`
// (`wit/metacontroller@0.1.0/hooks.wit`); the host does the rest of what
// Metacontroller does (the request, the update strategies, the writes).
//
// A hook file is what Metacontroller's nodejs hook server loads from its
// `hooks` folder: a CommonJS module whose export is a function of
// `{request: {body}}` that answers (or resolves to) `{status, body,
// headers}`; the server routes the URL path `/<name>` to the file
// `<name>.js`. This adapter calls that function with the request the host
// built as the server would (the parsed JSON body) and reads its answer as
// the server writes it: a 200 with the body (an object is JSON-encoded, a
// string sent as it is) is the hook's answer; any other status, a rejected
// promise or an exception is the hook's failure, reported with the status
// and body or the error's text, as the server's 500 carries it.
//
// This file imports nothing of the host's WIT but its own export, so a hook
// guest imports nothing at all.

/** A hook as Metacontroller's nodejs server calls it. */
export type Hook = (context: { request: { body: unknown } }) => unknown;

/** What a hook answers, as the nodejs server reads it. */
interface HookAnswer {
  status?: unknown;
  body?: unknown;
}

/** The WIT `hooks` interface of a hook guest. */
export interface HooksExport {
  definition(): string;
  call(name: string, request: string): Promise<string>;
}

function failure(message: string): { payload: string } {
  return { payload: message };
}

/** An exception as text: `Name: message`, then its stack when it has one. */
function textOf(e: unknown): string {
  if (e instanceof Error) return e.stack ? `${String(e)}\n${e.stack}` : String(e);
  return String(e);
}

/**
 * Calls `hook` with `body` and returns the body it answers with a 200, or
 * throws the hook's failure as text.
 */
export async function callHook(name: string, hook: Hook, body: unknown): Promise<string> {
  let answer: HookAnswer;
  try {
    answer = (await hook({ request: { body } })) as HookAnswer;
  } catch (e) {
    throw new Error(`hook ${name} threw: ${textOf(e)}`);
  }
  if (answer === null || typeof answer !== "object") {
    throw new Error(`hook ${name} answered ${String(answer)}, not {status, body}`);
  }
  const text = typeof answer.body === "string" ? answer.body : JSON.stringify(answer.body ?? null);
  if (answer.status !== 200) {
    throw new Error(`hook ${name} answered status ${String(answer.status)}: ${text}`);
  }
  return text;
}

/**
 * The WIT export of a hook guest: `export const hooks = exportHooks(...)`
 * in the entry `wasmop metacontroller build` generates, with the definition
 * it embeds and every hook file of the folder by its name.
 */
export function exportHooks(definition: string, hooks: { [name: string]: Hook }): HooksExport {
  return {
    definition(): string {
      return definition;
    },
    async call(name: string, request: string): Promise<string> {
      const hook = Object.prototype.hasOwnProperty.call(hooks, name) ? hooks[name] : undefined;
      if (hook === undefined) {
        throw failure(`no hook ${name}: the hooks folder has ${Object.keys(hooks).join(", ") || "none"}`);
      }
      try {
        return await callHook(name, hook, JSON.parse(request));
      } catch (e) {
        throw failure(e instanceof Error ? e.message : String(e));
      }
    },
  };
}
