package engine

// The backends this build links, and the only file of package engine that
// names a concrete backend: each registers itself (backend.Register) when
// imported, and the engine opens them by name (backend.Open). A new
// backend (cuda) is one more import here, under its build constraint in
// a file of its own if it needs one.

import (
	"github.com/cortiq/cortiq/backend"
	"github.com/cortiq/cortiq/cpu"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/webgpu"
)

// sessionBytes estimates one session per backend, from the architecture
// alone (MemoryFor).
var sessionBytes = []struct {
	name  string
	bytes func(a *model.Arch, ctx int, o backend.Options) backend.Memory
}{
	{"cpu", func(a *model.Arch, ctx int, o backend.Options) backend.Memory {
		return cpu.SessionBytes(a, ctx, ctx, cpu.Options{RewindDepth: o.RewindDepth, KVF16: o.KVF16})
	}},
	{"webgpu", func(a *model.Arch, ctx int, o backend.Options) backend.Memory {
		return webgpu.SessionBytes(a, ctx, webgpu.Options{RewindDepth: o.RewindDepth, KVF16: o.KVF16})
	}},
}
