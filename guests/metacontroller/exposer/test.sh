#!/usr/bin/env bash
# Black-box test of the exposer decorator, in the form of Metacontroller's
# examples' test.sh: apply, wait on the cluster's state, change, wait,
# delete. The controller runs already (its install step is
# `wasmop metacontroller build` and a host running the module). NS names
# the namespace (default: default).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ns=${NS:-default}

cleanup() {
  kubectl delete -n "$ns" -f "$here/sample.yaml" --ignore-not-found --wait=false >/dev/null 2>&1 || true
}
trap cleanup EXIT

# wait_for <what> <command…>: until the command succeeds, at most 120 s.
wait_for() {
  local what=$1; shift
  for _ in $(seq 1 240); do
    if "$@" >/dev/null 2>&1; then echo "    ok: $what"; return 0; fi
    sleep 0.5
  done
  echo "FAILED waiting for: $what" >&2
  kubectl get -n "$ns" deployments,services -o wide --show-labels >&2 || true
  return 1
}

port_is() { [[ "$(kubectl get -n "$ns" service "$1" -o 'jsonpath={.spec.ports[0].port}')" == "$2" ]]; }
decorated() {
  [[ "$(kubectl get -n "$ns" deployment "$1" -o 'jsonpath={.metadata.labels.mc\.example\.com/exposed}/{.metadata.annotations.mc\.example\.com/service}')" == "true/$1" ]]
}
no_service() { ! kubectl get -n "$ns" service "$1" >/dev/null 2>&1; }

echo "Two Deployments, one labelled to be exposed..."
kubectl apply -n "$ns" -f "$here/sample.yaml" >/dev/null
wait_for "web's Service on port 80" port_is web 80
wait_for "web labelled and annotated" decorated web
sleep 2
no_service internal || { echo "FAILED: an unlabelled Deployment was decorated" >&2; exit 1; }

echo "Annotate another port: the Service is updated in place..."
kubectl annotate -n "$ns" deployment web mc.example.com/port=8080 >/dev/null
wait_for "web's Service on port 8080" port_is web 8080

echo "Delete the attachment by hand: it comes back..."
kubectl delete -n "$ns" service web >/dev/null
wait_for "web's Service back" port_is web 8080

echo "Label the other Deployment: it is decorated too..."
kubectl label -n "$ns" deployment internal mc.example.com/expose=true >/dev/null
wait_for "internal's Service on port 80" port_is internal 80
wait_for "internal labelled and annotated" decorated internal

echo "Delete the Deployments: their Services go with them..."
kubectl delete -n "$ns" -f "$here/sample.yaml" >/dev/null
wait_for "web's Service gone" no_service web
wait_for "internal's Service gone" no_service internal
echo "PASS"
