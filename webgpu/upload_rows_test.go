package webgpu

import (
	"bytes"
	"context"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cortiq/cortiq/cmf"
	"github.com/cortiq/cortiq/gguf"
	"github.com/cortiq/cortiq/importer"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/shaders"
	"github.com/cortiq/cortiq/synth"
	"github.com/cortiq/cortiq/tensor"
	"github.com/cortiq/cortiq/writer"
)

// withRowChunk forces tiny row ranges for the duration of a test.
func withRowChunk(t *testing.T, n int) {
	old := rowChunkBytes
	rowChunkBytes = n
	t.Cleanup(func() { rowChunkBytes = old })
}

// rangeWeights serves MapWeights through model.RangeReader.
type rangeWeights struct{ model.MapWeights }

func (w rangeWeights) TensorInfo(name string) (tensor.Codec, []int, bool) {
	t, ok := w.MapWeights[name]
	if !ok {
		return 0, nil, false
	}
	return t.Codec, t.Shape, true
}

func (w rangeWeights) ReadTensorRows(name string, row0, nrows int, dst []byte) error {
	t := w.MapWeights[name]
	rb, _ := t.Codec.RowBytes(t.Cols())
	copy(dst, t.Data[row0*rb:(row0+nrows)*rb])
	return nil
}

// TestUploadRowsMatchesWhole checks the row-range upload against the whole
// tensor's encoding for every codec, including odd block counts per row
// (q8_0/q4_0 scale planes must stay 4-byte aligned per range).
func TestUploadRowsMatchesWhole(t *testing.T) {
	d := testDevice(t)
	withRowChunk(t, 4<<10)
	b := &Backend{dev: d}
	rng := rand.New(rand.NewSource(1))
	for _, c := range append([]tensor.Codec{tensor.F32, tensor.F16, tensor.BF16, tensor.Q8_0, tensor.Q4_0, tensor.Q4_K, tensor.Q6_K}, paddedCodecs()...) {
		if c.HasSide() {
			// Laid out whole with its side field (uploadNamed never
			// streams it): row ranges are refused by name.
			ht := &tensor.Tensor{Name: "w", Codec: c, Shape: []int{4, 64}}
			if _, err := b.uploadRows(context.Background(), rangeWeights{model.MapWeights{"w": ht}}, "w", c, ht.Shape); err == nil || !strings.Contains(err.Error(), "w") {
				t.Errorf("%s: row-range upload: %v", c, err)
			}
			continue
		}
		for _, cols := range []int{64, 96, 100, 512} {
			if _, err := c.RowBytes(cols); err != nil {
				continue
			}
			rows := 301
			f := make([]float32, rows*cols)
			for i := range f {
				f[i] = float32(rng.NormFloat64())
			}
			n, _ := tensor.ByteLen(c, []int{rows, cols})
			data := make([]byte, n)
			if err := tensor.Quantize(data, c, f); err != nil {
				t.Fatal(err)
			}
			src := &tensor.Tensor{Name: "w", Codec: c, Shape: []int{rows, cols}, Data: data}
			want, wc, _, _, wsoff, err := encodeForDevice([]*tensor.Tensor{src})
			if err != nil {
				t.Fatal(err)
			}
			rw := rangeWeights{model.MapWeights{"w": src}}
			dw, err := b.uploadRows(context.Background(), rw, "w", c, src.Shape)
			if err != nil {
				t.Fatalf("%s/%d: %v", c, cols, err)
			}
			got, err := d.ReadBuffer(dw.buf, uint64(len(want)))
			dw.buf.Release()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) || dw.codec != wc || dw.soff != wsoff || dw.bytes != int64(len(want)) || dw.rows != rows || dw.cols != cols {
				t.Errorf("%s/%d cols: row-range upload differs from the whole tensor's (codec %s/%s, soff %d/%d, bytes %d/%d)", c, cols, dw.codec, wc, dw.soff, wsoff, dw.bytes, len(want))
			}
		}
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r *os.File
	n atomic.Int64
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.n.Add(int64(n))
	return n, err
}

// TestLazyUploadChunked loads a synthetic q4_0/q8_0 model from unmapped
// GGUF and CMF files with tiny row ranges: the device buffers and logits
// must equal the memory-mapped whole-tensor load's, and each weight byte is
// read at most once.
func TestLazyUploadChunked(t *testing.T) {
	d := testDevice(t)
	for _, q := range []tensor.Codec{tensor.Q4_0, tensor.Q8_0} {
		t.Run(q.String(), func(t *testing.T) {
			dir := t.TempDir()
			gpath := filepath.Join(dir, "m.gguf")
			if err := synth.Write(gpath, synth.Shapes["tiny"], q); err != nil {
				t.Fatal(err)
			}
			ref, err := importer.FromGGUF(gpath)
			if err != nil {
				t.Fatal(err)
			}
			defer ref.Close()
			cpath := filepath.Join(dir, "m.cmf")
			if err := writer.SaveCMF(ref, cpath, writer.SaveOptions{Keep: true}); err != nil {
				t.Fatal(err)
			}
			var weightBytes int64
			for _, name := range ref.Weights.Names() {
				w, _ := ref.Weights.Tensor(name)
				weightBytes += int64(len(w.Data))
			}
			rb, err := New(ref, Options{Device: d, Chunk: 8})
			if err != nil {
				t.Fatal(err)
			}
			defer rb.Close()
			tokens := []int{1, 7, 42, 300, 5}
			wantLogits := forwardAll(t, rb, tokens)

			withRowChunk(t, 4<<10)
			for _, kind := range []string{"gguf", "cmf"} {
				t.Run(kind, func(t *testing.T) {
					path := gpath
					if kind == "cmf" {
						path = cpath
					}
					fd, err := os.Open(path)
					if err != nil {
						t.Fatal(err)
					}
					defer fd.Close()
					st, _ := fd.Stat()
					cr := &countingReader{r: fd}
					var m *model.Model
					if kind == "gguf" {
						f, err := gguf.Read(cr, st.Size(), path)
						if err != nil {
							t.Fatal(err)
						}
						m, err = importer.FromGGUFFile(f)
						if err != nil {
							t.Fatal(err)
						}
					} else {
						f, err := cmf.Read(cr, st.Size(), path)
						if err != nil {
							t.Fatal(err)
						}
						m, err = importer.FromCMFFile(f)
						if err != nil {
							t.Fatal(err)
						}
					}
					if _, ok := m.Weights.(model.RangeReader); !ok {
						t.Fatalf("%s lazy weights are not a model.RangeReader", kind)
					}
					before := cr.n.Load()
					b, err := New(m, Options{Device: d, Chunk: 8})
					if err != nil {
						t.Fatal(err)
					}
					defer b.Close()
					if read := cr.n.Load() - before; read > weightBytes {
						t.Errorf("upload read %d bytes, the weights are %d", read, weightBytes)
					}
					for _, p := range [][2]*dweight{{b.emb, rb.emb}, {b.head, rb.head}} {
						got, err := d.ReadBuffer(p[0].buf, uint64(p[1].bytes))
						if err != nil {
							t.Fatal(err)
						}
						want, err := d.ReadBuffer(p[1].buf, uint64(p[1].bytes))
						if err != nil {
							t.Fatal(err)
						}
						if !bytes.Equal(got, want) || p[0].soff != p[1].soff || p[0].bytes != p[1].bytes {
							t.Errorf("%s: device buffer differs from the whole-tensor upload", p[0].name)
						}
					}
					got := forwardAll(t, b, tokens)
					for i := range got {
						if got[i] != wantLogits[i] {
							t.Fatalf("logit %d: %v, whole-tensor load gives %v", i, got[i], wantLogits[i])
						}
					}
				})
			}
		})
	}
}

func forwardAll(t *testing.T, b *Backend, tokens []int) []float32 {
	t.Helper()
	s, err := b.NewSession(32)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out, err := s.Forward(tokens, true)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestUploadPartsMatchesFused checks fused tensors uploaded part by part
// against the encoding of their concatenation.
func TestUploadPartsMatchesFused(t *testing.T) {
	d := testDevice(t)
	b := &Backend{dev: d}
	rng := rand.New(rand.NewSource(2))
	for _, c := range append([]tensor.Codec{tensor.F32, tensor.F16, tensor.BF16, tensor.Q8_0, tensor.Q4_0, tensor.Q4_K, tensor.Q6_K}, paddedCodecs()...) {
		for _, cols := range []int{64, 96, 256} {
			if _, err := c.RowBytes(cols); err != nil {
				continue
			}
			for _, parts := range [][]int{{10, 6, 6}, {7, 3}} {
				var ts []*tensor.Tensor
				for i, rows := range parts {
					f := make([]float32, rows*cols)
					for j := range f {
						f[j] = float32(rng.NormFloat64())
					}
					// EncodeTensor: Quantize, plus q8_2f's column field.
					data, side, err := tensor.EncodeTensor(c, []int{rows, cols}, f)
					if err != nil {
						t.Fatal(err)
					}
					ts = append(ts, &tensor.Tensor{Name: string(rune('a' + i)), Codec: c, Shape: []int{rows, cols}, Data: data, Side: side})
				}
				want, wc, _, _, wsoff, err := encodeForDevice(ts)
				if err != nil {
					t.Fatal(err)
				}
				dw, err := b.uploadWeight("fused", ts...)
				if err != nil {
					t.Fatalf("%s/%d %v: %v", c, cols, parts, err)
				}
				got, err := d.ReadBuffer(dw.buf, uint64(len(want)))
				dw.buf.Release()
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) || dw.codec != wc || dw.soff != wsoff || dw.bytes != int64(len(want)) {
					t.Errorf("%s/%d cols %v: part-by-part upload differs from the fused encoding", c, cols, parts)
				}
			}
		}
	}
}

// paddedCodecs are the codecs the device reads besides the first ones
// (f32, f16, q8_0, q4_0, q4_K, q6_K): those held as padded blocks (and the
// IQ codecs' appended grid) and the low-bit ones repacked into planes.
func paddedCodecs() []tensor.Codec {
	var cs []tensor.Codec
	for _, c := range shaders.Codecs {
		switch c {
		case tensor.F32, tensor.F16, tensor.Q8_0, tensor.Q4_0, tensor.Q4_K, tensor.Q6_K:
		default:
			cs = append(cs, c)
		}
	}
	return cs
}
