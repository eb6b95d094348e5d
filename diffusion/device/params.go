package device

import (
	"encoding/binary"
	"fmt"
	"math"
)

// params packs an image kernel's uniform struct: each value is a u32 or an
// f32. (The same packing as the model backend's: the image kernels move to
// typed params structs with the rest of the kernel table.)
func params(vals ...any) []byte {
	b := make([]byte, 0, 4*len(vals))
	for _, v := range vals {
		var u uint32
		switch x := v.(type) {
		case uint32:
			u = x
		case int:
			u = uint32(x)
		case float32:
			u = math.Float32bits(x)
		case bool:
			if x {
				u = 1
			}
		default:
			panic(fmt.Sprintf("webgpu: params: %T", v))
		}
		b = binary.LittleEndian.AppendUint32(b, u)
	}
	for len(b)%16 != 0 {
		b = append(b, 0, 0, 0, 0)
	}
	return b
}
