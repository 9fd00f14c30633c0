import assert from "node:assert/strict";
import { test } from "node:test";

import { callHook, exportHooks, type Hook } from "./metacontroller.ts";

const echo: Hook = async (context) => ({ status: 200, body: { saw: context.request.body } });

test("a 200 answer's body is the hook's answer: an object as JSON, a string as it is", async () => {
  assert.equal(await callHook("sync", echo, { parent: 1 }), '{"saw":{"parent":1}}');
  const text: Hook = () => ({ status: 200, body: '{"children":[]}' });
  assert.equal(await callHook("sync", text, {}), '{"children":[]}');
});

test("another status, an exception or no answer is the hook's failure, in its words", async () => {
  const refuses: Hook = async () => ({ status: 500, body: "trouble" });
  await assert.rejects(callHook("sync", refuses, {}), /hook sync answered status 500: trouble/);
  const throws: Hook = async () => {
    throw new TypeError("no parent");
  };
  await assert.rejects(callHook("sync", throws, {}), /hook sync threw: TypeError: no parent/);
  const silent: Hook = () => undefined;
  await assert.rejects(callHook("sync", silent, {}), /answered undefined, not \{status, body\}/);
});

test("the export answers the definition and calls hooks by name, refusing an unknown one", async () => {
  const hooks = exportHooks('{"definition":{}}', { sync: echo });
  assert.equal(hooks.definition(), '{"definition":{}}');
  assert.equal(await hooks.call("sync", '{"a":1}'), '{"saw":{"a":1}}');
  await assert.rejects(hooks.call("finalize", "{}"), (e: unknown) => {
    assert.match((e as { payload: string }).payload, /no hook finalize: the hooks folder has sync/);
    return true;
  });
  // A name of Object.prototype is no hook either.
  await assert.rejects(hooks.call("toString", "{}"), (e: unknown) => {
    assert.match((e as { payload: string }).payload, /no hook toString/);
    return true;
  });
});
