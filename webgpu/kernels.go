package webgpu

import (
	"fmt"

	"github.com/cortiq/cortiq/gpu"
	"github.com/cortiq/cortiq/shaders"
)

// kinds is kernel name's binding kinds, from the kernel table
// (shaders.Lookup): the one place they are written.
func kinds(name string) []gpu.BindKind {
	k := shaders.Lookup(name)
	out := make([]gpu.BindKind, len(k.Binds))
	for i, b := range k.Binds {
		switch b {
		case shaders.Uniform:
			out[i] = gpu.Uniform
		case shaders.ReadOnly:
			out[i] = gpu.ReadOnly
		case shaders.ReadWrite:
			out[i] = gpu.ReadWrite
		default:
			panic(fmt.Sprintf("webgpu: kernel %s: binding kind %d", name, b))
		}
	}
	return out
}

// u is a size, count or offset as a WGSL u32 (never negative here).
func u32(n int) uint32 { return uint32(n) }

// flag is a bool as a WGSL u32.
func flag(b bool) shaders.Flag { return shaders.FlagOf(b) }
