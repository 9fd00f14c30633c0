#!/usr/bin/env bash
# Black-box test of the petset controller, in the form of Metacontroller's
# examples' test.sh: apply, wait on the cluster's state, change, wait,
# delete. The controller runs already (its install step is
# `wasmop metacontroller build` and a host running the module); the
# PetSet's CRD is installed. NS names the namespace (default: default).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ns=${NS:-default}
name=web

cleanup() {
  kubectl delete -n "$ns" petsets.mc.example.com "$name" --ignore-not-found --wait=false >/dev/null 2>&1 || true
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
  kubectl get -n "$ns" petsets.mc.example.com,pods -o wide >&2 || true
  kubectl get -n "$ns" petsets.mc.example.com "$name" -o yaml >&2 || true
  return 1
}

field() { kubectl get -n "$ns" petsets.mc.example.com "$name" -o "jsonpath={$1}"; }
ready_is() { [[ "$(field .status.readyReplicas)" == "$1" && "$(field .status.replicas)" == "$1" ]]; }
images_are() {
  local images
  images=$(kubectl get -n "$ns" pods -l "mc.example.com/petset=$name" -o 'jsonpath={range .items[*]}{.spec.containers[0].image}{"\n"}{end}' | sort -u)
  [[ "$images" == "$1" ]]
}
pods_are() {
  local pods
  pods=$(kubectl get -n "$ns" pods -l "mc.example.com/petset=$name" -o 'jsonpath={range .items[*]}{.metadata.name}{" "}{end}')
  [[ "$pods" == "$1" ]]
}

echo "Create a PetSet of 3..."
kubectl apply -n "$ns" -f "$here/sample.yaml"
wait_for "3 Pods Ready, created in order" ready_is 3
wait_for "Pods web-0 web-1 web-2" pods_are "web-0 web-1 web-2 "

echo "Change the template: a rolling recreate, one Pod at a time..."
kubectl patch -n "$ns" petsets.mc.example.com "$name" --type merge \
  -p '{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:1.28"}]}}}}'
wait_for "every Pod on nginx:1.28" images_are "nginx:1.28"
wait_for "3 Pods Ready again" ready_is 3

echo "Scale down to 1..."
kubectl patch -n "$ns" petsets.mc.example.com "$name" --type merge -p '{"spec":{"replicas":1}}'
wait_for "only web-0 left" pods_are "web-0 "
wait_for "1 Pod Ready" ready_is 1

echo "Scale up to 2..."
kubectl patch -n "$ns" petsets.mc.example.com "$name" --type merge -p '{"spec":{"replicas":2}}'
wait_for "2 Pods Ready" ready_is 2

echo "Delete the PetSet: the finalize hook removes its Pods first..."
kubectl delete -n "$ns" petsets.mc.example.com "$name" --wait=false
wait_for "no Pod left" pods_are ""
wait_for "the PetSet gone" bash -c "! kubectl get -n '$ns' petsets.mc.example.com '$name'"
echo "PASS"
