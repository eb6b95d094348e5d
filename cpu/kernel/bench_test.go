package kernel

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cortiq/cortiq/tensor"
)

// benchWeight fills a [rows, cols] tensor with random bytes whose block
// scales are small finite halves (fast to build at any size).
func benchWeight(c tensor.Codec, rows, cols int) *tensor.Tensor {
	rb, _ := c.RowBytes(cols)
	data := make([]byte, rows*rb)
	r := rand.New(rand.NewPCG(uint64(rows), uint64(cols)))
	for i := 0; i+8 <= len(data); i += 8 {
		binary.LittleEndian.PutUint64(data[i:], r.Uint64())
	}
	half := tensor.F32ToF16(0.01)
	switch c {
	case tensor.F32:
		for i := 0; i < len(data); i += 4 {
			binary.LittleEndian.PutUint32(data[i:], 0x3c000000|binary.LittleEndian.Uint32(data[i:])&0x807fffff)
		}
	case tensor.F16:
		for i := 0; i < len(data); i += 2 {
			binary.LittleEndian.PutUint16(data[i:], binary.LittleEndian.Uint16(data[i:])&0x83ff|0x2000)
		}
	case tensor.Q8_0, tensor.Q4_0, tensor.Q4_K:
		for i := 0; i < len(data); i += c.BlockBytes() {
			binary.LittleEndian.PutUint16(data[i:], half)
			if c == tensor.Q4_K {
				binary.LittleEndian.PutUint16(data[i+2:], half)
			}
		}
	case tensor.Q6_K:
		for i := 0; i < len(data); i += c.BlockBytes() {
			binary.LittleEndian.PutUint16(data[i+208:], half)
		}
	case tensor.MXFP4:
		for i := 0; i < len(data); i += c.BlockBytes() {
			data[i] = 120 // 2^-7
		}
	default:
		// The float16 scales (and mins) of the other block codecs: random
		// bits would hold infinities, NaNs and subnormals, whose
		// arithmetic is far slower than that of real weights.
		offs := map[tensor.Codec][]int{
			tensor.Q4_1: {0, 2}, tensor.Q5_0: {0}, tensor.Q5_1: {0, 2}, tensor.IQ4_NL: {0},
			tensor.Q5_K: {0, 2}, tensor.Q2_K: {80, 82}, tensor.Q3_K: {108}, tensor.IQ4_XS: {0},
		}[c]
		for i := 0; len(offs) > 0 && i < len(data); i += c.BlockBytes() {
			for _, o := range offs {
				binary.LittleEndian.PutUint16(data[i+o:], half)
			}
		}
	}
	return &tensor.Tensor{Name: "bench", Codec: c, Shape: []int{rows, cols}, Data: data}
}

var benchShapes = [][2]int{{896, 896}, {4864, 896}, {896, 4864}, {151936, 896}, {2048, 2048}}

func BenchmarkMatVec(b *testing.B) {
	for _, c := range allCodecs {
		for _, sh := range benchShapes {
			if sh[0] > 100000 && c != tensor.Q8_0 && c != tensor.Q6_K && c != tensor.Q4_0 {
				continue
			}
			if sh[1]%c.BlockLen() != 0 {
				continue
			}
			b.Run(fmt.Sprintf("%s_%dx%d", c, sh[0], sh[1]), func(b *testing.B) {
				w := benchWeight(c, sh[0], sh[1])
				x := randX(rand.New(rand.NewPCG(1, 2)), sh[1])
				y := make([]float32, sh[0])
				b.SetBytes(int64(len(w.Data)))
				for b.Loop() {
					MatVec(y, w, x)
				}
			})
		}
	}
}

// BenchmarkMatMul reports weight bytes per second and tokens per second
// for a 64-token prefill chunk.
func BenchmarkMatMul(b *testing.B) {
	const n = 64
	for _, c := range allCodecs {
		for _, sh := range [][2]int{{896, 896}, {4864, 896}, {896, 4864}, {2048, 2048}} {
			if sh[1]%c.BlockLen() != 0 {
				continue
			}
			b.Run(fmt.Sprintf("%s_%dx%d_n%d", c, sh[0], sh[1], n), func(b *testing.B) {
				w := benchWeight(c, sh[0], sh[1])
				x := randX(rand.New(rand.NewPCG(1, 2)), n*sh[1])
				y := make([]float32, n*sh[0])
				b.SetBytes(int64(len(w.Data)))
				for b.Loop() {
					MatMul(y, w, x, n)
				}
				b.ReportMetric(float64(2*n*sh[0]*sh[1])*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkParallelFor is the fixed cost of one parallel call (two
// trivial chunks).
func BenchmarkParallelFor(b *testing.B) {
	var sink [2]int
	for b.Loop() {
		parallelFor(2, 1, func(lo, hi int) { sink[lo]++ })
	}
}

// BenchmarkDecodeStep runs the matrix-vector products of one decode step
// of Qwen2.5-0.5B (24 layers of q/k/v/o and gate/up/down, then the tied
// 151936-row output) with every weight in one codec, as llama.cpp's q4_0
// and q8_0 files store them (the output stays q8_0 in both). It reports
// steps per second: the ceiling the matrix products put on decode speed.
func BenchmarkDecodeStep(b *testing.B) {
	const hidden, ffn, kv, vocab, layers = 896, 4864, 128, 151936, 24
	for _, c := range []tensor.Codec{tensor.Q4_0, tensor.Q8_0} {
		for _, m := range []Mode{Exact, Int8} {
			b.Run(fmt.Sprintf("qwen0.5b_%s_%s", c, m), func(b *testing.B) {
				type layer struct{ q, k, v, o, gate, up, down *tensor.Tensor }
				ls := make([]layer, layers)
				var bytes int64
				for i := range ls {
					ls[i] = layer{
						benchWeight(c, hidden, hidden), benchWeight(c, kv, hidden), benchWeight(c, kv, hidden),
						benchWeight(c, hidden, hidden), benchWeight(c, ffn, hidden), benchWeight(c, ffn, hidden),
						benchWeight(c, hidden, ffn),
					}
					for _, w := range []*tensor.Tensor{ls[i].q, ls[i].k, ls[i].v, ls[i].o, ls[i].gate, ls[i].up, ls[i].down} {
						bytes += int64(len(w.Data))
					}
				}
				out := benchWeight(tensor.Q8_0, vocab, hidden)
				bytes += int64(len(out.Data))
				x := randX(rand.New(rand.NewPCG(1, 2)), hidden)
				h := make([]float32, ffn)
				g := make([]float32, ffn)
				y := make([]float32, hidden)
				logits := make([]float32, vocab)
				defer SetMode(SetMode(m))
				b.SetBytes(bytes)
				for b.Loop() {
					for _, l := range ls {
						MatVec(y, l.q, x)
						MatVec(h[:kv], l.k, x)
						MatVec(h[:kv], l.v, x)
						MatVec(y, l.o, x)
						MatVec(g, l.gate, x)
						MatVec(h, l.up, x)
						MatVec(y, l.down, h)
					}
					MatVec(logits, out, x)
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "steps/s")
			})
		}
	}
}

// BenchmarkDecodeStream runs the matrix-vector products of one decode step
// of Llama-3.2-1B (16 layers: q, k, v as one MatMuls group, o, gate and up
// as one group, down; then the tied 128256-row output) with every weight
// in one codec, Int8 mode, as the CPU session issues them, at the level
// CORTIQ_CPU_LEVEL starts the package at (main_test.go). The weights
// (0.7 GB at q4_0) are larger than this machine's last-level cache, so it
// measures the memory stream: "GB/s" is the GGUF bytes a step reads, and
// "of_read" that rate over ReadBandwidth's on 1 GiB measured before the
// loop (the `cortiq bench --bandwidth` probe; the decode
// aim is ≥ 0.9 of it). Run with -cpu 1,2 and -count several, A/B
// interleaved, on a quiet machine.
func BenchmarkDecodeStream(b *testing.B) {
	for _, c := range []tensor.Codec{tensor.Q4_0, tensor.Q8_0, tensor.Q4_K, tensor.Q6_K} {
		b.Run("llama1b_"+c.String(), func(b *testing.B) {
			defer SetMode(SetMode(Int8))
			step, bytes, done := llama1bDecode(c)
			defer done()
			step() // packs the weights
			rd := readGBs()
			b.SetBytes(bytes)
			b.ResetTimer()
			for b.Loop() {
				step()
			}
			gbs := float64(bytes) * float64(b.N) / b.Elapsed().Seconds() / 1e9
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "steps/s")
			b.ReportMetric(rd, "read_GB/s")
			b.ReportMetric(gbs/rd, "of_read")
		})
	}
}

// llama1bDecode builds Llama-3.2-1B's weights in codec c (random) and
// returns one decode step's products as the CPU session issues them, the
// GGUF bytes they read, and a function that drops the packed tiles.
func llama1bDecode(c tensor.Codec) (step func(), bytes int64, done func()) {
	return decodeStep(c, 2048, 8192, 512, 128256, 16)
}

// qwen05bDecode is llama1bDecode at Qwen2.5-0.5B's shapes (hidden 896,
// 24 layers, a 151936-row head): small products, where the hand-off
// between products costs the most.
func qwen05bDecode(c tensor.Codec) (step func(), bytes int64, done func()) {
	return decodeStep(c, 896, 4864, 128, 151936, 24)
}

func decodeStep(c tensor.Codec, hidden, ffn, kv, vocab, layers int) (step func(), bytes int64, done func()) {
	type layer struct{ q, k, v, o, gate, up, down *tensor.Tensor }
	ls := make([]layer, layers)
	var all []*tensor.Tensor
	for i := range ls {
		ls[i] = layer{
			benchWeight(c, hidden, hidden), benchWeight(c, kv, hidden), benchWeight(c, kv, hidden),
			benchWeight(c, hidden, hidden), benchWeight(c, ffn, hidden), benchWeight(c, ffn, hidden),
			benchWeight(c, hidden, ffn),
		}
		all = append(all, ls[i].q, ls[i].k, ls[i].v, ls[i].o, ls[i].gate, ls[i].up, ls[i].down)
	}
	out := benchWeight(c, vocab, hidden)
	all = append(all, out)
	for _, w := range all {
		bytes += int64(len(w.Data))
	}
	x := randX(rand.New(rand.NewPCG(1, 2)), hidden)
	h := make([]float32, ffn)
	g := make([]float32, ffn)
	y := make([]float32, hidden)
	q, k, v := make([]float32, hidden), make([]float32, kv), make([]float32, kv)
	logits := make([]float32, vocab)
	step = func() {
		for _, l := range ls {
			MatMuls(x, 1, Product{q, l.q}, Product{k, l.k}, Product{v, l.v})
			MatVec(y, l.o, q)
			MatMuls(x, 1, Product{g, l.gate}, Product{h, l.up})
			MatVec(y, l.down, h)
		}
		MatVec(logits, out, x)
	}
	done = func() {
		for _, w := range all {
			Unpack(w)
		}
	}
	return step, bytes, done
}

// readGBs is the read bandwidth of ReadBandwidth over 1 GiB (the best of
// three passes).
func readGBs() float64 { return ReadBandwidth(1024, 3) }
