#!/usr/bin/env bash
# Black-box test of the fanout controller, in the form of Metacontroller's
# examples' test.sh: apply, wait on the cluster's state, change, wait,
# delete. The controller runs already (its install step is
# `wasmop metacontroller build` and a host running the module); the
# Fanout's CRD is installed. NS names the namespace (default: default).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ns=${NS:-default}
name=settings

cleanup() {
  kubectl delete -n "$ns" fanouts.mc.example.com "$name" --ignore-not-found --wait=false >/dev/null 2>&1 || true
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
  kubectl get -n "$ns" fanouts.mc.example.com,configmaps -o wide >&2 || true
  kubectl get -n "$ns" fanouts.mc.example.com "$name" -o yaml >&2 || true
  return 1
}

field() { kubectl get -n "$ns" fanouts.mc.example.com "$name" -o "jsonpath={$1}"; }
status_is() { [[ "$(field .status.copies)" == "$1" && "$(field .status.inSync)" == "$2" ]]; }
greetings_are() {
  local values
  values=$(kubectl get -n "$ns" configmaps -l "mc.example.com/fanout=$name" -o 'jsonpath={range .items[*]}{.data.greeting}{"\n"}{end}' | sort | tr '\n' ' ')
  [[ "$values" == "$1" ]]
}
condition_says() {
  field '.status.conditions[?(@.type=="GuestReconciled")].message' | grep -q "$1"
}

echo "Create a Fanout of 3..."
kubectl apply -n "$ns" -f "$here/sample.yaml"
wait_for "3 ConfigMaps saying hello" greetings_are "hello hello hello "
wait_for "status: 3 copies, 3 in sync" status_is 3 3

echo "Change the data: updated in place..."
kubectl patch -n "$ns" fanouts.mc.example.com "$name" --type merge -p '{"spec":{"data":{"greeting":"bonjour"}}}'
wait_for "3 ConfigMaps saying bonjour" greetings_are "bonjour bonjour bonjour "
wait_for "status: 3 in sync" status_is 3 3

echo "Ask for too many copies: the hook raises, the sync fails with its words..."
kubectl patch -n "$ns" fanouts.mc.example.com "$name" --type merge -p '{"spec":{"copies":50}}'
wait_for "the parent's condition names the hook's error" condition_says "at most 10 are allowed"
wait_for "the 3 ConfigMaps untouched" greetings_are "bonjour bonjour bonjour "

echo "Scale to 2..."
kubectl patch -n "$ns" fanouts.mc.example.com "$name" --type merge -p '{"spec":{"copies":2}}'
wait_for "2 ConfigMaps" greetings_are "bonjour bonjour "
wait_for "status: 2 copies" status_is 2 2

echo "Delete the Fanout: its ConfigMaps go with it..."
kubectl delete -n "$ns" fanouts.mc.example.com "$name"
wait_for "no ConfigMap left" greetings_are ""
echo "PASS"
