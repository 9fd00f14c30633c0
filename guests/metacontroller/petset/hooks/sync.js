// A StatefulSet-like controller as Metacontroller's nodejs hook server
// runs one: a PetSet keeps `spec.replicas` Pods named <name>-0, <name>-1, …
// It creates them in order, each once the ones before it are Ready; the
// definition's RollingRecreate replaces them one at a time when the
// template changes; scaling down removes the highest ordinals. It is also
// the finalize hook: while the PetSet is being deleted it removes the Pods
// from the highest ordinal down, one per call, and says `finalized` once
// none is left.

function ready(pod) {
  const conditions = (pod.status && pod.status.conditions) || [];
  return !pod.metadata.deletionTimestamp &&
    conditions.some((c) => c.type === 'Ready' && c.status === 'True');
}

function podName(set, ordinal) {
  return `${set.metadata.name}-${ordinal}`;
}

function podFor(set, ordinal) {
  const template = set.spec.template || {};
  const meta = template.metadata || {};
  const labels = Object.assign({}, meta.labels || {});
  labels['mc.example.com/petset'] = set.metadata.name;
  labels['mc.example.com/ordinal'] = String(ordinal);
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {name: podName(set, ordinal), labels: labels},
    spec: JSON.parse(JSON.stringify(template.spec || {})),
  };
}

module.exports = async function (context) {
  const request = context.request.body;
  const set = request.parent;
  const observed = request.children['Pod.v1'] || {};
  const pods = Object.values(observed);
  const status = {
    replicas: pods.length,
    readyReplicas: pods.filter(ready).length,
  };
  const children = [];
  if (request.finalizing) {
    const ordinals = pods
      .map((pod) => Number(pod.metadata.name.slice(set.metadata.name.length + 1)))
      .filter((n) => Number.isInteger(n) && n >= 0)
      .sort((a, b) => a - b);
    ordinals.pop();
    for (const ordinal of ordinals) children.push(podFor(set, ordinal));
    return {
      status: 200,
      body: {status: status, children: children, finalized: pods.length === 0},
      headers: {'Content-Type': 'application/json'},
    };
  }
  const replicas = set.spec.replicas === undefined ? 1 : set.spec.replicas;
  let previousReady = true;
  let creating = false;
  for (let ordinal = 0; ordinal < replicas; ordinal++) {
    const pod = observed[podName(set, ordinal)];
    if (pod) {
      children.push(podFor(set, ordinal));
    } else if (previousReady && !creating) {
      children.push(podFor(set, ordinal));
      creating = true;
    }
    previousReady = previousReady && pod !== undefined && ready(pod);
  }
  return {
    status: 200,
    body: {status: status, children: children},
    headers: {'Content-Type': 'application/json'},
  };
};
