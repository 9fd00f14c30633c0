// Package hostile is the hostile test guest's attacks that are Go's own,
// selected by a Hostile's spec.attack (the kind of guests/hostile/crd.yaml):
// a heap grown past the memory cap, a spin, goroutines that never end, a
// panic, a panic inside a goroutine, a wait no goroutine will end, and a
// sleep. Each must end as the host ends any guest's: a limit, a deadline
// or a trap, named, and the next call starts afresh.
package hostile

import (
	"fmt"
	"time"

	wasmop "wasmop.dev/sdk"
)

// Hostile reconciles Hostiles by attacking.
type Hostile struct{}

// Describe declares Hostiles and their ConfigMaps.
func (Hostile) Describe(wasmop.Settings) (wasmop.Description, error) {
	return wasmop.For(wasmop.KindRef{Group: "test.wasmop.dev", Version: "v1alpha1", Kind: "Hostile"}).
		Owns(wasmop.KindConfigMap).Complete(), nil
}

// hoard keeps what the heap attack allocates reachable.
var hoard [][]byte

// Reconcile attacks as spec.attack says.
func (Hostile) Reconcile(req *wasmop.Request) (*wasmop.Response, error) {
	attack, _ := wasmop.String(req.Parent(), "spec", "attack")
	switch attack {
	case "go-heap":
		for {
			block := make([]byte, 1<<20)
			for i := range block {
				block[i] = 0xA5
			}
			hoard = append(hoard, block)
		}
	case "go-spin":
		spin()
	case "go-goroutines":
		// Ten thousand goroutines that never end: the call answers, and its
		// instance (with them) is thrown away.
		never := make(chan struct{})
		for range 10000 {
			go func() { <-never }()
		}
		return answer(req, "10000 goroutines left waiting")
	case "go-goroutine-spin":
		done := make(chan struct{})
		go func() {
			spin()
			close(done)
		}()
		<-done
	case "go-panic":
		explode("hostile panics in reconcile")
	case "go-goroutine-panic":
		done := make(chan struct{})
		go func() {
			explode("hostile panics in a goroutine")
			close(done)
		}()
		<-done
	case "go-deadlock":
		<-make(chan struct{})
	case "go-sleep":
		time.Sleep(time.Hour)
	}
	return answer(req, "none")
}

// answer is the harmless answer: a ConfigMap and what was done.
func answer(req *wasmop.Request, what string) (*wasmop.Response, error) {
	return wasmop.NewResponse().
		Child(map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": req.Name() + "-ok", "labels": map[string]string{"app": "hostile"}},
			"data":     map[string]string{"ok": "true"},
		}).
		Status(map[string]any{"ok": true, "did": what}), nil
}

// counter keeps the spin from being optimised away.
var counter uint64

//go:noinline
func spin() {
	for {
		counter++
	}
}

//go:noinline
func explode(message string) {
	panic(fmt.Sprintf("%s (%d)", message, len(message)))
}

func init() { wasmop.Export(Hostile{}) }
