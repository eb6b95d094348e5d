package webgpu

import (
	"errors"
	"testing"

	"github.com/cortiq/cortiq/backend"
	"github.com/cortiq/cortiq/gpu"
	"github.com/cortiq/cortiq/model"
)

// splitRun drives a session holding only some layers through the
// backend.SplitSession contract as the scheduler does (engine/split.go),
// the other layers run by a second, all-device session: the device half
// of the split (x crossing out and back at each boundary, the runner's
// own KV) is tested without the CPU. The engine's tests split with the
// CPU.
type splitRun struct {
	dev  *Session
	run  backend.LayerRunner
	runs int
}

func newSplitRun(t *testing.T, d *gpu.Device, name string, dev *Session) *splitRun {
	m, _ := loadFixture(t, name)
	hb, err := New(m, Options{Device: d, Chunk: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hb.Close() })
	hs, err := hb.newSession(dev.maxLen)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hs.Close() })
	return &splitRun{dev: dev, run: hs}
}

func (r *splitRun) Forward(tokens []int, all bool) ([]float32, error) {
	on := r.dev.Layers()
	var out []float32
	step := r.dev.StepRows(all)
	for c0 := 0; c0 < len(tokens); c0 += step {
		chunk := tokens[c0:min(c0+step, len(tokens))]
		pos0, n, i := r.dev.Len(), len(chunk), 0
		for i < len(on) && on[i] {
			i++
		}
		x, err := r.dev.EmbedLayers(chunk, i)
		if err != nil {
			return nil, err
		}
		for i < len(on) {
			j := i
			for j < len(on) && on[j] == on[i] {
				j++
			}
			if on[i] && j == len(on) {
				break
			}
			if on[i] {
				err = r.dev.ForwardLayers(x, n, pos0, i, j)
			} else {
				err = r.run.ForwardLayers(x, n, pos0, i, j)
				r.runs += j - i
			}
			if err != nil {
				return nil, err
			}
			i = j
		}
		l, err := r.dev.LayersHead(x, i, all)
		if err != nil {
			return nil, err
		}
		if all {
			out = append(out, l...)
		} else {
			out = l
		}
	}
	return out, nil
}

func TestParseLayerRanges(t *testing.T) {
	cases := []struct {
		spec string
		want string
		bad  bool
	}{
		{"", "111111", false},
		{"0-1,4", "110010", false},
		{" 2 - 3 , 5-99", "001101", false},
		{"3", "000100", false},
		{"3-1", "", true},
		{"x", "", true},
		{"-2", "", true},
	}
	for _, c := range cases {
		sel, err := ParseLayerRanges(c.spec, 6)
		if c.bad {
			if err == nil {
				t.Errorf("%q: accepted", c.spec)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.spec, err)
			continue
		}
		got := ""
		for _, on := range sel {
			if on {
				got += "1"
			} else {
				got += "0"
			}
		}
		if got != c.want {
			t.Errorf("%q: %s, want %s", c.spec, got, c.want)
		}
	}
}

func TestSplitLayers(t *testing.T) {
	d := testDevice(t)
	for _, tc := range []struct {
		name   string
		layers string
		budget bool
	}{
		{"smollm3", "0,2", false}, // device, host, device, host
		{"smollm3", "1-3", false}, // host first
		{"gemma2", "", true},      // budget: only a prefix fits
	} {
		t.Run(tc.name+"/"+tc.layers, func(t *testing.T) {
			m, ref := loadFixture(t, tc.name)
			opts := Options{Device: d, Chunk: 16, Layers: tc.layers}
			if tc.budget {
				// Room for the embedding, the head and one layer.
				opts.VRAMBudget = embBytes(m) + int64(4*m.Arch.Hidden) + layerBytes(m, 0) + 1
			}
			b, err := New(m, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			on := b.DeviceLayers()
			t.Logf("device layers %v", on)
			if tc.budget && (!on[0] || on[1]) {
				t.Fatalf("budget placement %v, want only layer 0", on)
			}
			ds, err := b.newSession(64)
			if err != nil {
				t.Fatal(err)
			}
			defer ds.Close()
			if _, err := ds.Forward(ref.InputIDs, true); !errors.Is(err, ErrUnsupported) {
				t.Errorf("Forward on a split session: %v, want ErrUnsupported (the scheduler runs it)", err)
			}
			s := newSplitRun(t, d, tc.name, ds)
			got, err := s.Forward(ref.InputIDs, true)
			if err != nil {
				t.Fatal(err)
			}
			checkRows(t, "prompt", got, ref.Logits, m.Arch.Vocab, parityTol)
			l, err := s.Forward(ref.Generated[:1], false)
			if err != nil {
				t.Fatal(err)
			}
			checkRows(t, "decode", l, ref.StepLogits[m.Arch.Vocab:2*m.Arch.Vocab], m.Arch.Vocab, parityTol)
			if s.runs == 0 {
				t.Errorf("no layer ran off the device")
			}
		})
	}
}

func embBytes(m *model.Model) int64 {
	t, _ := m.Weights.Tensor(model.TokenEmbd)
	n := deviceBytes(t.Codec, t.Rows(), t.Cols())
	if !m.Arch.TiedEmbeddings {
		h, _ := m.Weights.Tensor(model.Output)
		n += deviceBytes(h.Codec, h.Rows(), h.Cols())
	}
	return n
}

func FuzzParseLayerRanges(f *testing.F) {
	for _, s := range []string{"", "0-9,20-29", "0,2,4", "5", "3-1", "-", "1-", "99999999999999999999", " 2 - 3 ,, "} {
		f.Add(s, 30)
	}
	f.Fuzz(func(t *testing.T, spec string, n int) {
		if n < 0 || n > 1<<12 {
			return
		}
		sel, err := ParseLayerRanges(spec, n)
		if err != nil {
			return
		}
		if len(sel) != n {
			t.Fatalf("%d selections for %d layers", len(sel), n)
		}
	})
}
