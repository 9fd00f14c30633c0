#!/usr/bin/env bash
# Black-box test of the propagation controller, in the form of
# Metacontroller's examples' test.sh: apply, wait on the cluster's state,
# change, wait, delete. The controller runs already (its install step is
# `wasmop metacontroller build` and a host running the module); the
# ConfigPropagation's CRD is installed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
name=settings
kind=configpropagations.mc.example.com

cleanup() {
  kubectl delete "$kind" "$name" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  kubectl delete namespace prop-src prop-a prop-b prop-c --ignore-not-found --wait=false >/dev/null 2>&1 || true
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
  kubectl get "$kind" "$name" -o yaml >&2 || true
  kubectl get configmaps -A -l "!kube-root-ca.crt" 2>/dev/null | grep -E "prop-|NAMESPACE" >&2 || true
  return 1
}

copy_says() { [[ "$(kubectl get configmap -n "$1" "$name" -o 'jsonpath={.data.greeting}')" == "$2" ]]; }
absent() { ! kubectl get configmap -n "$1" "$name" >/dev/null 2>&1; }
status_is() {
  [[ "$(kubectl get "$kind" "$name" -o 'jsonpath={.status.copies}/{.status.inSync}/{.status.source}')" == "$1" ]]
}

echo "Namespaces and the source ConfigMap..."
for ns in prop-src prop-a prop-b prop-c; do kubectl create namespace "$ns" >/dev/null; done
kubectl create configmap -n prop-src "$name" --from-literal=greeting=hello >/dev/null

echo "Propagate it to two namespaces (a cluster-scoped parent, namespaced children)..."
kubectl apply -f "$here/sample.yaml"
wait_for "a copy in prop-a" copy_says prop-a hello
wait_for "a copy in prop-b" copy_says prop-b hello
wait_for "status: 2 copies, 2 in sync, source found" status_is 2/2/found
absent prop-c

echo "Change the source (a related object): every copy follows..."
kubectl patch configmap -n prop-src "$name" --type merge -p '{"data":{"greeting":"bonjour"}}' >/dev/null
wait_for "prop-a says bonjour" copy_says prop-a bonjour
wait_for "prop-b says bonjour" copy_says prop-b bonjour

echo "Move the targets to prop-b and prop-c: prop-a's copy is pruned..."
kubectl patch "$kind" "$name" --type merge -p '{"spec":{"targetNamespaces":["prop-b","prop-c"]}}' >/dev/null
wait_for "a copy in prop-c" copy_says prop-c bonjour
wait_for "no copy in prop-a" absent prop-a

echo "Delete a copy by hand: it comes back..."
kubectl delete configmap -n prop-b "$name" >/dev/null
wait_for "prop-b's copy back" copy_says prop-b bonjour

echo "Pause the parent (its labelSelector leaves it out): the source's change stays put..."
kubectl label "$kind" "$name" mc.example.com/paused=true >/dev/null
kubectl patch configmap -n prop-src "$name" --type merge -p '{"data":{"greeting":"hola"}}' >/dev/null
sleep 3
copy_says prop-b bonjour || { echo "FAILED: a paused parent was synced" >&2; exit 1; }
kubectl label "$kind" "$name" mc.example.com/paused- >/dev/null
wait_for "unpaused: prop-b says hola" copy_says prop-b hola

echo "Delete the source: the copies go..."
kubectl delete configmap -n prop-src "$name" >/dev/null
wait_for "no copy in prop-b" absent prop-b
wait_for "status: source missing" status_is 0/0/missing

echo "Delete the parent..."
kubectl create configmap -n prop-src "$name" --from-literal=greeting=again >/dev/null
wait_for "a copy in prop-c again" copy_says prop-c again
kubectl delete "$kind" "$name" >/dev/null
wait_for "its copies go with it" absent prop-c
echo "PASS"
