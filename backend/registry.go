package backend

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/cortiq/cortiq/model"
)

// Options are what the scheduler (package engine) asks of a backend it
// opens. Every field's zero value is the default.
type Options struct {
	// RewindDepth is the number of newest positions a session of a model
	// with recurrent layers can rewind exactly (0 = DefaultRewindDepth).
	RewindDepth int
	// KVF16 keeps the KV caches in half precision.
	KVF16 bool
	// Layers selects the decoder layers the backend holds, as ranges
	// ("0-13", "0-9,20-29"); "" = every layer that fits MemBudget. A
	// backend that holds only some returns SplitSessions: the scheduler
	// runs the rest on the CPU.
	Layers string
	// MemBudget bounds the bytes the backend may hold (0 = the device's
	// own limit).
	MemBudget int64
	// ReserveContext, with a MemBudget, sets aside the memory of one
	// session of that many positions before the weights are placed.
	ReserveContext int
	// AllowSoftware accepts a software adapter (lavapipe, SwiftShader):
	// correct but usually slower than the CPU backend.
	AllowSoftware bool
	// Tuning carries backend-specific knobs built by the front end (for
	// webgpu a webgpu.Tuning); nil = the backend's defaults.
	Tuning any
}

// ErrSoftware is what an Opener's error is (errors.Is) when it declines a
// software device (lavapipe, SwiftShader) because Options.AllowSoftware is
// false.
var ErrSoftware = errors.New("software device")

// Opener opens a backend for a model. It fails, leaving nothing allocated,
// when there is no device or the device cannot run the model (the
// scheduler then runs it on the CPU and reports why).
type Opener func(ctx context.Context, m *model.Model, opts Options) (Backend, error)

// Identifier says which device a backend's Opener would open for m,
// without opening it: no upload, no kernels built, no device memory taken
// beyond what naming it needs (the driver's device name, the adapter's
// info). The name is what the opened Backend's Name would be, so the
// scheduler can look a saved verdict up and open only its winner. It
// fails as the Opener would when there is no device ("no libcuda.so.1",
// no adapter, a software adapter without Options.AllowSoftware, a model
// the backend refuses before touching the device), and with
// ErrUnidentified when it cannot tell without opening (the scheduler then
// opens the backend to learn its name).
type Identifier func(ctx context.Context, m *model.Model, opts Options) (string, error)

// ErrUnidentified is what an Identifier's error is (errors.Is) when the
// device cannot be named without opening it, and what Identify returns for
// a backend registered without an Identifier.
var ErrUnidentified = errors.New("backend: the device cannot be named without opening it")

var (
	regMu       sync.RWMutex
	openers     = map[string]Opener{}
	identifiers = map[string]Identifier{}
)

// Register makes a backend available by name, as database/sql drivers
// are: each backend package registers itself from one file under its
// build constraints, and a program links the backends it wants by
// importing those packages (package engine does, in its backends files).
// Register panics when open is nil or the name is taken.
func Register(name string, open Opener) {
	regMu.Lock()
	defer regMu.Unlock()
	if open == nil {
		panic("backend: Register of a nil opener for " + name)
	}
	if _, dup := openers[name]; dup {
		panic("backend: Register called twice for " + name)
	}
	openers[name] = open
}

// RegisterIdentifier gives the backend registered as name an Identifier
// (optional: a backend without one is opened to learn its name). It panics
// when id is nil, name is not registered or already has one.
func RegisterIdentifier(name string, id Identifier) {
	regMu.Lock()
	defer regMu.Unlock()
	if id == nil {
		panic("backend: RegisterIdentifier of a nil identifier for " + name)
	}
	if _, ok := openers[name]; !ok {
		panic("backend: RegisterIdentifier before Register for " + name)
	}
	if _, dup := identifiers[name]; dup {
		panic("backend: RegisterIdentifier called twice for " + name)
	}
	identifiers[name] = id
}

// Identify names the device the backend registered under name would open
// for m, without opening it (see Identifier); ErrUnidentified when the
// backend has no Identifier.
func Identify(ctx context.Context, name string, m *model.Model, opts Options) (string, error) {
	regMu.RLock()
	_, ok := openers[name]
	id := identifiers[name]
	regMu.RUnlock()
	if !ok {
		return "", fmt.Errorf("backend: no backend %q in this build (have %v)", name, Names())
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if id == nil {
		return "", fmt.Errorf("%w (%s has no identifier)", ErrUnidentified, name)
	}
	return id(ctx, m, opts)
}

// Open opens the backend registered under name for m.
func Open(ctx context.Context, name string, m *model.Model, opts Options) (Backend, error) {
	regMu.RLock()
	open, ok := openers[name]
	regMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("backend: no backend %q in this build (have %v)", name, Names())
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return open(ctx, m, opts)
}

// Names lists the registered backends, sorted.
func Names() []string {
	regMu.RLock()
	defer regMu.RUnlock()
	names := make([]string, 0, len(openers))
	for n := range openers {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
