package webgpu

import (
	"github.com/cortiq/cortiq/gpu"
	"github.com/cortiq/cortiq/shaders"
)

// kinds is kernel name's binding kinds, from the kernel table
// (shaders.Lookup): the one place they are written.
func kinds(name string) []gpu.BindKind { return gpu.Kinds(shaders.Lookup(name).Binds) }

// u is a size, count or offset as a WGSL u32 (never negative here).
func u32(n int) uint32 { return uint32(n) }

// flag is a bool as a WGSL u32.
func flag(b bool) shaders.Flag { return shaders.FlagOf(b) }
