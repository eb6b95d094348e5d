package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/backend"
	"github.com/cortiq/cortiq/cmf"
	"github.com/cortiq/cortiq/cpu"
	"github.com/cortiq/cortiq/importer"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/resolve"
	"github.com/cortiq/cortiq/synth"
	"github.com/cortiq/cortiq/tensor"
	"github.com/cortiq/cortiq/writer"
)

// tinyCMF writes the synthetic tiny model as a CMF file in dir, with edit
// applied to the file's bytes given the directory's entries.
func tinyCMF(t *testing.T, edit func(raw []byte, f *cmf.File)) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "tiny.gguf")
	s, _ := synth.ParseShape("tiny")
	if err := synth.Write(src, s, tensor.Q8_0); err != nil {
		t.Fatal(err)
	}
	m, err := importer.FromGGUF(src)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "tiny.cmf")
	err = writer.SaveCMF(m, p, writer.SaveOptions{Keep: true})
	m.Close()
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		f, err := cmf.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := os.ReadFile(p)
		edit(raw, f)
		f.Close()
		if err := os.WriteFile(p, raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// A CMF file with a damaged tensor is refused at load, naming the file and
// the tensor, on every backend choice; Check (what info uses) agrees.
func TestLoadRefusesDamagedCMF(t *testing.T) {
	const victim = "blk.1.ffn_down.weight"
	p := tinyCMF(t, func(raw []byte, f *cmf.File) {
		e, _ := f.Entry(victim)
		raw[e.Offset+7] ^= 1
	})
	for _, backend := range []string{"cpu", "auto"} {
		_, err := Load(context.Background(), &resolve.Resolver{CacheDir: t.TempDir()}, p, Options{Backend: backend})
		if err == nil || !strings.Contains(err.Error(), victim) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "checksum mismatch") {
			t.Fatalf("Load(%s, %s) = %v, want a checksum error naming the file and %s", p, backend, err, victim)
		}
	}
	m, err := importer.Open(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := Check(m); err == nil || !strings.Contains(err.Error(), victim) {
		t.Fatalf("Check = %v", err)
	}
}

// tinyModelWith imports the synthetic tiny model with the first float of
// tensor name (an f32 norm weight) set to v, in memory.
func tinyModelWith(t *testing.T, name string, v float32) *model.Model {
	t.Helper()
	return tinyModelEdit(t, name, func(c tensor.Codec, data []byte) {
		if c != tensor.F32 {
			t.Fatalf("%s is %s, want f32", name, c)
		}
		binary.LittleEndian.PutUint32(data, math.Float32bits(v))
	})
}

// tinyModelEdit imports the synthetic tiny model with edit applied to a
// copy of tensor name's data, in memory.
func tinyModelEdit(t *testing.T, name string, edit func(c tensor.Codec, data []byte)) *model.Model {
	t.Helper()
	src := filepath.Join(t.TempDir(), "tiny.gguf")
	s, _ := synth.ParseShape("tiny")
	if err := synth.Write(src, s, tensor.Q8_0); err != nil {
		t.Fatal(err)
	}
	m, err := importer.FromGGUF(src)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	w := model.MapWeights{}
	for _, n := range m.Weights.Names() {
		w[n], _ = m.Weights.Tensor(n)
	}
	if name != "" {
		bad := *w[name]
		bad.Data = bytes.Clone(bad.Data)
		edit(bad.Codec, bad.Data)
		w[name] = &bad
	}
	m.Weights = w
	return m
}

// A NaN or infinity in the weights stops greedy generation with an error
// naming the first layer whose output is not finite, instead of emitting
// token 0 until the length limit.
func TestNonFiniteStopsGeneration(t *testing.T) {
	for _, c := range []struct {
		tensor string
		v      float32
		want   string
	}{
		{"blk.1.ffn_norm.weight", float32(math.NaN()), "layer 1's FFN output"},
		{"blk.0.attn_norm.weight", float32(math.Inf(1)), "layer 0's attention output"},
		{model.OutputNorm, float32(math.NaN()), "the output norm"},
	} {
		m := tinyModelWith(t, c.tensor, c.v)
		e, err := NewFromModel(m, Options{Backend: "cpu"})
		if err != nil {
			t.Fatal(err)
		}
		res, err := e.Generate(context.Background(), Request{IDs: []int{1, 2, 3}, MaxTokens: 8, IgnoreEOS: true}, nil)
		var nf *cpu.NonFiniteError
		if !errors.As(err, &nf) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s = %v: Generate = %v, %v; want an error naming %q", c.tensor, c.v, res, err, c.want)
		}
		if _, err := e.Logits(context.Background(), []int{1, 2}); !errors.As(err, &nf) {
			t.Errorf("%s = %v: Logits error %v", c.tensor, c.v, err)
		}
	}
}

// nanDevice is a device backend whose sessions compute on the CPU but
// return NaN logits from the poisonAt-th Forward on.
type nanDevice struct {
	cpu      backend.Backend
	poisonAt int
}

func (d *nanDevice) Name() string { return "fake-device" }
func (d *nanDevice) Close() error { return nil }
func (d *nanDevice) NewSession(n int) (backend.Session, error) {
	s, err := d.cpu.NewSession(n)
	return &nanSession{Session: s, d: d}, err
}

type nanSession struct {
	backend.Session
	d     *nanDevice
	calls int
}

func (s *nanSession) Forward(tokens []int, all bool) ([]float32, error) {
	out, err := s.Session.Forward(tokens, all)
	s.calls++
	if err == nil && s.calls >= s.d.poisonAt {
		out[len(out)/2] = float32(math.NaN())
	}
	return out, err
}

// Non-finite logits from a device are caught per token: the CPU replays
// the sequence and, the model being sound, the generation continues there
// with the tokens of a pure CPU run, the device's fault reported; with a
// broken model the CPU replay names the layer.
func TestDeviceNonFiniteLogitsReplayOnCPU(t *testing.T) {
	ids := []int{1, 2, 3}
	req := Request{IDs: ids, MaxTokens: 8, IgnoreEOS: true}
	m := tinyModelWith(t, "", 0)
	c, err := cpu.New(m, cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want, err := newEngine(t, m, Options{Backend: "cpu"}).Generate(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	nanOpen = func() backend.Backend { return &nanDevice{cpu: c, poisonAt: 3} }
	e := newEngine(t, m, Options{Backend: "nan-test"})
	got, err := e.Generate(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got.IDs) != fmt.Sprint(want.IDs) || got.Backend != "cpu" || !strings.Contains(got.DeviceError, "non-finite logit") {
		t.Fatalf("got %v on %s (device error %q), want %v on the CPU with the device's fault reported", got.IDs, got.Backend, got.DeviceError, want.IDs)
	}

	bad := tinyModelWith(t, "blk.1.ffn_norm.weight", float32(math.NaN()))
	nanOpen = func() backend.Backend { return &nanDevice{cpu: nanFree{}, poisonAt: 1} }
	e = newEngine(t, bad, Options{Backend: "nan-test"})
	_, err = e.Generate(context.Background(), req, nil)
	if err == nil || !strings.Contains(err.Error(), "layer 1's FFN output") {
		t.Fatalf("broken model through the device: %v, want the CPU replay naming layer 1", err)
	}
}

// nanOpen makes the "nan-test" backend's instance for the test running.
var nanOpen func() backend.Backend

// The fake device registers as any backend does: the engine opens it by
// name, forced, as it would open webgpu or cuda.
func init() {
	backend.Register("nan-test", func(context.Context, *model.Model, backend.Options) (backend.Backend, error) {
		return nanOpen(), nil
	})
}

// newEngine builds an engine around m that leaves m to the caller.
func newEngine(t *testing.T, m *model.Model, opts Options) *Engine {
	t.Helper()
	e, err := NewFromModel(m, opts)
	if err != nil {
		t.Fatal(err)
	}
	e.owned = false
	t.Cleanup(func() { e.cpu.Close() })
	return e
}

// nanFree is a backend whose sessions return finite zero logits (a device
// that hides nothing but computes nothing either): the engine only sees
// the NaN nanSession injects.
type nanFree struct{}

func (nanFree) Name() string                            { return "zeros" }
func (nanFree) Close() error                            { return nil }
func (nanFree) NewSession(int) (backend.Session, error) { return &zeroSession{}, nil }

type zeroSession struct{ n int }

func (z *zeroSession) Forward(tokens []int, all bool) ([]float32, error) {
	z.n += len(tokens)
	rows := 1
	if all {
		rows = len(tokens)
	}
	return make([]float32, rows*512), nil
}
func (z *zeroSession) Len() int     { return z.n }
func (z *zeroSession) Reset()       { z.n = 0 }
func (z *zeroSession) Close() error { return nil }
