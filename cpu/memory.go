package cpu

import (
	"runtime"

	"github.com/cortiq/cortiq/backend"
	"github.com/cortiq/cortiq/model"
)

// SessionBytes is the memory a CPU session of maxLen positions takes with
// opts once full, running steps of up to step tokens (a prompt runs in
// one step): the KV caches (sliding-window rings, f16 halves), the
// recurrent states kept per step, and the activations of one step (its
// projections, FFN and attention scratch; routed experts' scratch is not
// counted). `cortiq info --ctx N` prints it; the engine checks a budget
// with it.
func SessionBytes(a *model.Arch, maxLen, step int, opts Options) backend.Memory {
	var m backend.Memory
	if maxLen <= 0 {
		return m
	}
	slots := opts.RewindDepth + 1
	if opts.RewindDepth <= 0 {
		slots = backend.DefaultRewindDepth + 1
	}
	elem := int64(4)
	if opts.KVF16 {
		elem = 2
	}
	var maxQKV, maxAtt, maxFFN, maxHD int
	for i := range a.Layers {
		l := &a.Layers[i]
		if at := l.Attn; at != nil {
			rows := maxLen
			if !opts.FullKV {
				if r := RingLen(at.Window, slots-1, maxLen); r > 0 {
					rows = r
				}
			}
			kv := at.KVHeads * at.HeadDim
			m.KV += 2 * int64(rows) * int64(kv) * elem
			q := at.Heads * at.HeadDim
			if at.OutputGate {
				q *= 2
			}
			maxQKV = max(maxQKV, q+2*kv)
			maxAtt = max(maxAtt, at.Heads*at.HeadDim)
			maxHD = max(maxHD, at.HeadDim)
		}
		if c := l.Conv; c != nil {
			m.State += 4 * int64(slots) * int64((c.Kernel-1)*a.Hidden)
			maxAtt = max(maxAtt, 3*a.Hidden)
		}
		if d := l.Delta; d != nil {
			kd, vd := d.KeyHeads*d.KeyDim, d.ValueHeads*d.ValueDim
			m.State += 4 * int64(slots) * int64((d.ConvKernel-1)*(2*kd+vd)+d.ValueHeads*d.KeyDim*d.ValueDim)
			maxQKV = max(maxQKV, 2*kd+2*vd)
		}
		maxFFN = max(maxFFN, l.FFNHidden)
		if l.MoE != nil {
			maxFFN = max(maxFFN, l.MoE.SharedHidden)
		}
	}
	n := int64(max(1, min(step, maxLen)))
	act := n*int64(4*a.Hidden+maxQKV+maxAtt+2*maxFFN) + int64(a.Vocab) +
		int64(runtime.GOMAXPROCS(0))*int64(maxLen+2*maxHD)
	m.Activations = 4 * act
	return m
}
