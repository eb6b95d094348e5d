package importer

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/cmf"
	"github.com/cortiq/cortiq/cpu"
	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/synth"
	"github.com/cortiq/cortiq/tensor"
	"github.com/cortiq/cortiq/writer"
)

// damagedCMF writes the synthetic tiny model as CMF and flips one byte in
// the data of tensor victim; it returns the path.
func damagedCMF(t *testing.T, victim string) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "tiny.gguf")
	s, _ := synth.ParseShape("tiny")
	if err := synth.Write(src, s, tensor.Q8_0); err != nil {
		t.Fatal(err)
	}
	m, err := FromGGUF(src)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "tiny.cmf")
	err = writer.SaveCMF(m, p, writer.SaveOptions{Keep: true})
	m.Close()
	if err != nil {
		t.Fatal(err)
	}
	f, err := cmf.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	e, ok := f.Entry(victim)
	if !ok {
		t.Fatalf("no tensor %s", victim)
	}
	off := e.Offset + e.Length/2
	f.Close()
	raw, _ := os.ReadFile(p)
	raw[off] ^= 0x40
	if err := os.WriteFile(p, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// A flipped byte in a tensor's data is found on the tensor's first use and
// the model refused with the file and the tensor's name: mapped, read on
// demand, and read in row ranges.
func TestCMFDamagedTensorRefused(t *testing.T) {
	const victim = "blk.1.attn_k.weight" // [64, 32]: several rows
	p := damagedCMF(t, victim)
	wantErr := func(t *testing.T, err error) {
		t.Helper()
		var ce *cmf.ChecksumError
		if !errors.As(err, &ce) || ce.Tensor != victim || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), victim) {
			t.Fatalf("error %v, want a checksum error naming %s and %s", err, p, victim)
		}
	}
	m, err := FromCMF(p) // opening reads no tensor data
	if err != nil {
		t.Fatal(err)
	}
	if _, ranged := m.Weights.(model.RangeReader); ranged && runtime.GOOS == "linux" {
		t.Error("mapped weights offer row ranges: the device would upload them piecewise")
	}
	if _, ok := m.Weights.Tensor("blk.0.ffn_norm.weight"); !ok {
		t.Fatal("intact tensor refused")
	}
	_, err = cpu.New(m, cpu.Options{})
	wantErr(t, err)
	if _, ok := m.Weights.Tensor(victim); ok {
		t.Fatal("damaged tensor returned")
	}
	wantErr(t, model.WeightsErr(m.Weights))
	m.Close()

	raw, _ := os.ReadFile(p)
	open := func() *model.Model {
		f, err := cmf.Read(bytes.NewReader(raw), int64(len(raw)), p)
		if err != nil {
			t.Fatal(err)
		}
		m, err := FromCMFFile(f)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	lazy := open()
	_, err = cpu.New(lazy, cpu.Options{})
	wantErr(t, err)

	// Row ranges, in order: the last row's read reports the damage.
	rr := open().Weights.(model.RangeReader)
	c, shape, _ := rr.TensorInfo(victim)
	rows := (&tensor.Tensor{Shape: shape}).Rows()
	rb, _ := c.RowBytes(shape[len(shape)-1])
	buf := make([]byte, rb)
	for r := range rows {
		err := rr.ReadTensorRows(victim, r, 1, buf)
		if r < rows-1 && err != nil {
			t.Fatalf("row %d: %v", r, err)
		}
		if r == rows-1 {
			wantErr(t, err)
		}
	}
	// Out of order: the tensor is checked whole at once.
	rr = open().Weights.(model.RangeReader)
	wantErr(t, rr.ReadTensorRows(victim, rows-1, 1, buf))
	// An intact tensor read in row ranges passes.
	if c, shape, _ = rr.TensorInfo("blk.0.attn_q.weight"); true {
		rb, _ := c.RowBytes(shape[len(shape)-1])
		buf := make([]byte, rb*shape[0])
		if err := rr.ReadTensorRows("blk.0.attn_q.weight", 0, shape[0], buf); err != nil {
			t.Fatal(err)
		}
	}
}

// Closing a model while the background pass checks its mapping is safe
// (Close waits for the pass), and the pass's findings are what Tensor
// reports.
func TestCMFCloseDuringBackgroundCheck(t *testing.T) {
	const victim = "blk.1.ffn_up.weight"
	p := damagedCMF(t, victim)
	for range 20 {
		m, err := FromCMF(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
	m, err := FromCMF(p)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if w, ok := m.Weights.(*cmfWeights); ok {
		w.bg.Wait() // the pass has checked every tensor
	}
	if _, ok := m.Weights.Tensor(victim); ok {
		t.Fatal("damaged tensor returned")
	}
	var ce *cmf.ChecksumError
	if err := model.WeightsErr(m.Weights); !errors.As(err, &ce) || ce.Tensor != victim {
		t.Fatalf("error %v", err)
	}
}
