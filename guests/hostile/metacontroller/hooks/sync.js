// A hostile sync hook for Metacontroller's nodejs hook server: it does what
// the parent's spec.attack says. "none" answers one ConfigMap, as a
// well-behaved hook does.

function configMap(name, extra) {
  return Object.assign({apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: name}, data: {a: 'b'}}, extra || {});
}

module.exports = async function (context) {
  const parent = context.request.body.parent;
  const name = parent.metadata.name;
  const ok = (body) => ({status: 200, body: body, headers: {'Content-Type': 'application/json'}});
  switch (parent.spec.attack) {
    case 'none':
      return ok({status: {fine: true}, children: [configMap(`${name}-fine`)]});
    case 'throw':
      throw new Error('the hook gave up: boom');
    case 'status-500':
      return {status: 500, body: 'internal trouble in the hook'};
    case 'not-json':
      return {status: 200, body: '<html>not json</html>'};
    case 'no-answer':
      return undefined;
    case 'never-settles':
      return new Promise(() => {});
    case 'spin':
      for (;;) {}
    case 'memory': {
      const hoard = [];
      for (;;) hoard.push(new Uint8Array(8 << 20).fill(1));
    }
    case 'too-many-children': {
      const children = [];
      for (let i = 0; i < 500; i++) children.push(configMap(`${name}-${i}`));
      return ok({children: children});
    }
    case 'undeclared-kind':
      return ok({children: [{apiVersion: 'v1', kind: 'Secret', metadata: {name: `${name}-s`}, stringData: {a: 'b'}}]});
    case 'owner-reference':
      return ok({children: [configMap(`${name}-owned`, {metadata: {name: `${name}-owned`, ownerReferences: [{apiVersion: 'v1', kind: 'Namespace', name: 'kube-system', uid: '00000000-0000-0000-0000-000000000000'}]}})]});
    case 'other-namespace':
      return ok({children: [configMap(`${name}-away`, {metadata: {name: `${name}-away`, namespace: 'kube-system'}})]});
    case 'host-label':
      return ok({children: [configMap(`${name}-label`, {metadata: {name: `${name}-label`, labels: {'wasmop.dev/guest': 'someone-else'}}})]});
    case 'parent-status-not-object':
      return ok({status: 'all good', children: []});
    default:
      return ok({status: {unknownAttack: String(parent.spec.attack)}, children: []});
  }
};
