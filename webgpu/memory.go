package webgpu

import (
	"fmt"

	"github.com/cortiq/cortiq/backend"
	"github.com/cortiq/cortiq/gpu"
	"github.com/cortiq/cortiq/model"
)

// SessionBytes is the device memory a session of maxLen positions takes
// with opts (Chunk, KVF16, FullKV, RewindDepth; every layer on the
// device, native binding limits): the KV caches as alloc
// sizes them (sliding-window rings, f16 halves), the recurrent state
// rings of hybrid layers, and the step's activation buffers. It opens no
// device: `cortiq info --ctx N` prints it, and the engine checks a
// budget with it before allocating. Routed-expert scratch and the staging
// buffers (host memory) are not counted.
func SessionBytes(a *model.Arch, maxLen int, opts Options) backend.Memory {
	var m backend.Memory
	if maxLen <= 0 {
		return m
	}
	chunk := opts.Chunk
	if chunk <= 0 {
		chunk = 512
	}
	chunk = min(chunk, maxLen)
	slots := opts.RewindDepth + 1
	if opts.RewindDepth <= 0 {
		slots = backend.DefaultRewindDepth + 1
	}
	elem := int64(4)
	if opts.KVF16 {
		elem = 2
	}
	var maxQKV, maxAtt, maxFFN, maxHeads, maxHD int
	moe := false
	for i := range a.Layers {
		l := &a.Layers[i]
		if at := l.Attn; at != nil {
			qw, kvw := at.Heads*at.HeadDim, at.KVHeads*at.HeadDim
			maxQKV = max(maxQKV, qw+2*kvw)
			maxAtt = max(maxAtt, qw)
			maxHeads = max(maxHeads, at.Heads)
			maxHD = max(maxHD, at.HeadDim)
		} else {
			maxAtt = max(maxAtt, mixerWidth(l, a.Hidden))
		}
		maxFFN = max(maxFFN, l.FFNHidden)
		if l.MoE != nil {
			maxFFN = max(maxFFN, l.MoE.SharedHidden)
			moe = true
		}
	}
	if moe {
		chunk = min(chunk, moeChunk)
	}
	widest := max(a.Hidden, maxQKV, maxAtt, 2*maxFFN)
	chunk = max(1, min(chunk, gpu.MaxBinding/(4*widest)))
	ropes := map[string]bool{}
	for i := range a.Layers {
		l := &a.Layers[i]
		if at := l.Attn; at != nil {
			rows := maxLen
			if !opts.FullKV {
				if r := ringLen(at.Window, chunk, slots-1, maxLen); r > 0 {
					rows = r
				}
			}
			m.KV += 2 * int64(rows) * int64(at.KVHeads*at.HeadDim) * elem
			if key := fmt.Sprint(at.Rope, at.HeadDim); !ropes[key] {
				ropes[key] = true // the (cos, sin) table, one per distinct rotary setup
				rot := at.Rope.Dims
				if rot <= 0 {
					rot = at.HeadDim
				}
				m.Activations += 4 * 2 * int64(rot/2) * int64(maxLen)
			}
		}
		if c := l.Conv; c != nil {
			m.State += 4 * int64(slots) * int64((c.Kernel-1)*a.Hidden)
		}
		if d := l.Delta; d != nil {
			kd, vd := d.KeyHeads*d.KeyDim, d.ValueHeads*d.ValueDim
			m.State += 4 * int64(slots) * int64((d.ConvKernel-1)*(2*kd+vd)+d.ValueHeads*d.KeyDim*d.ValueDim)
		}
	}
	headRows := min(chunk, headChunk)
	splitLen := max(256, (maxLen+63)/64)
	splitLen = (splitLen + 63) &^ 63
	splits := max(1, min((maxLen+splitLen-1)/splitLen, 2048/chunk))
	decSplits := min(maxDecSplits, (maxLen+decSplitLen-1)/decSplitLen)
	c := int64(chunk)
	act := 3*c*int64(a.Hidden) + c*int64(maxQKV) + c*int64(maxAtt) + 3*c*int64(maxFFN) +
		int64(headRows)*int64(a.Vocab) + int64(max(chunk*splits, decSplits))*int64(maxHeads)*int64(maxHD+2)
	m.Activations += 4 * act
	return m
}

// MiB formats a byte count for messages.
func MiB(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
