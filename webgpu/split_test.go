package webgpu

import (
	"testing"

	"github.com/cortiq/cortiq/model"
)

// deviceHost serves HostLayers from a second, all-device backend, so the
// split plumbing (x crossing to the host and back at segment boundaries,
// the host's own KV) is tested without a CPU layer runner.
func deviceHost(t *testing.T, d *Device, name string) HostFactory {
	m, _ := loadFixture(t, name)
	hb, err := New(m, Options{Device: d, Chunk: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hb.Close() })
	return func(maxLen int) (HostLayers, error) {
		return hb.newSession(maxLen)
	}
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
			opts := Options{Device: d, Chunk: 16, Layers: tc.layers, Host: deviceHost(t, d, tc.name)}
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
			s, err := b.NewSession(64)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
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
			if st := b.Stats(); st.FallbackOps == 0 {
				t.Errorf("no host layer runs counted: %+v", st)
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
