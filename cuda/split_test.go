package cuda_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/backend"
	"github.com/cortiq/cortiq/cpu"
	"github.com/cortiq/cortiq/cuda"
	"github.com/cortiq/cortiq/cuda/driver"
)

func TestParseParts(t *testing.T) {
	p, err := cuda.ParseParts("0:0-13, 1:14-27", 28)
	if err != nil || fmt.Sprint(p) != "[0:0-13 1:14-27]" {
		t.Fatalf("%v %v", p, err)
	}
	for _, bad := range []string{"0:0-13,1:15-27", "0:0-13", "0:0-13,1:14-28", "0-13,14-27", "x:0-27", "0:3-1", "0:1-27"} {
		if _, err := cuda.ParseParts(bad, 28); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestPlanParts(t *testing.T) {
	layers := make([]int64, 16)
	for i := range layers {
		layers[i] = 100
	}
	for _, c := range []struct {
		free []int64
		want string
	}{
		{[]int64{1e6, 1e6}, "[0:0-7 1:8-15]"},
		{[]int64{3e6, 1e6}, "[0:0-11 1:12-15]"},
		{[]int64{1e6}, "[0:0-15]"},
		{[]int64{650, 1e6}, "[0:0-0 1:1-15]"},  // its share of the free memory
		{[]int64{450, 2000}, "[0:0-2 1:3-15]"}, // its share: 3 layers
		{[]int64{250, 2000}, "[0:0-0 1:1-15]"}, // its share is 2 layers, its room beside the embedding 1
	} {
		ords := make([]int, len(c.free))
		for i := range ords {
			ords[i] = i
		}
		p, err := cuda.PlanParts(ords, c.free, layers, 100, 100)
		if err != nil || fmt.Sprint(p) != c.want {
			t.Errorf("free %v: %v %v, want %s", c.free, p, err, c.want)
		}
	}
	if _, err := cuda.PlanParts([]int{0, 1}, []int64{500, 500}, layers, 100, 100); err == nil || !strings.Contains(err.Error(), "needs") {
		t.Errorf("a model larger than the devices: %v", err)
	}
}

// TestSplit runs a model split over two contexts (two contexts of one GPU
// when there is one — the logits must then match the CPU — else two fake
// devices, which check the plumbing: parts, hand-over, state).
func TestSplit(t *testing.T) {
	m := synthModel(t, "f32")
	_, real := baseDevice(t)
	var opened []string
	old := cuda.OpenDevice
	cuda.OpenDevice = func(o int) (driver.Device, error) {
		opened = append(opened, fmt.Sprint(o))
		if real {
			return driver.Open(0)
		}
		return driver.NewFake(1 << 30), nil
	}
	defer func() { cuda.OpenDevice = old }()
	b, err := cuda.OpenDevices(context.Background(), m, cuda.Options{}, []int{0, 1}, "", 64)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if !strings.Contains(b.Name(), "[0-0]+") || !strings.Contains(b.Name(), "[1-1]") {
		t.Fatalf("split %q, opened %v", b.Name(), opened)
	}
	s, err := b.NewSession(64)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, _ := cpu.New(m, cpu.Options{})
	defer c.Close()
	cs, _ := c.NewSession(64)
	ids := []int{1, 17, 33, 101, 7, 250, 64, 3, 9, 12}
	got, err := s.Forward(ids, true)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := cs.Forward(ids, true)
	if len(got) != len(want) {
		t.Fatalf("%d logits, want %d", len(got), len(want))
	}
	for _, tok := range []int{5, 6, 7} {
		g, err := s.Forward([]int{tok}, false)
		if err != nil {
			t.Fatal(err)
		}
		w, _ := cs.Forward([]int{tok}, false)
		if real && maxDiff(g, w) > parityTol {
			t.Errorf("decode: max |Δ| %.3g", maxDiff(g, w))
		}
	}
	if real && maxDiff(got, want) > parityTol {
		t.Errorf("prompt: max |Δ| %.3g", maxDiff(got, want))
	}
	st, err := s.(backend.StateExporter).ExportState()
	if err != nil || st.Pos != len(ids)+3 || len(st.Layers) != 2 {
		t.Fatalf("export: %v, %v", st, err)
	}
	s2, _ := b.NewSession(64)
	defer s2.Close()
	if err := s2.(backend.StateImporter).ImportState(st); err != nil {
		t.Fatal(err)
	}
	if err := s.(backend.Rewinder).Rewind(3); err != nil || s.Len() != len(ids) {
		t.Fatalf("rewind: %v, len %d", err, s.Len())
	}
	// Explicit ranges, and a bad one.
	b2, err := cuda.OpenDevices(context.Background(), m, cuda.Options{}, nil, "0:0-0,1:1-1", 64)
	if err != nil {
		t.Fatal(err)
	}
	b2.Close()
	if _, err := cuda.OpenDevices(context.Background(), m, cuda.Options{}, nil, "0:0-0", 64); err == nil {
		t.Error("ranges missing a layer accepted")
	}
}

// TestBiasPlumbing runs qwen2's biased q/k/v through every product path
// (one token fused, a verify batch, a prefill chunk) on the fake device or
// the GPU; on the GPU the logits must match the CPU.
func TestBiasPlumbing(t *testing.T) {
	m := synthShape(t, tinyQwen2, "f32")
	dev, real := baseDevice(t)
	b, err := cuda.Open(context.Background(), m, cuda.Options{Device: dev, Chunk: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c, _ := cpu.New(m, cpu.Options{})
	defer c.Close()
	s, _ := b.NewSession(64)
	cs, _ := c.NewSession(64)
	for _, ids := range [][]int{{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}, {21, 22, 23}, {24}} {
		got, err := s.Forward(ids, true)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := cs.Forward(ids, true)
		if len(got) != len(want) {
			t.Fatalf("%d logits, want %d", len(got), len(want))
		}
		if real && maxDiff(got, want) > parityTol {
			t.Errorf("%d tokens: max |Δ| %.3g", len(ids), maxDiff(got, want))
		}
	}
}

// TestGreedyBatches: greedy batches submitted ahead (the second continues
// from the first's last pick on the device), collected in order, and the
// newest dropped and submitted again: the positions add up and, on a GPU,
// the picks are the CPU's greedy tokens.
func TestGreedyBatches(t *testing.T) {
	m := synthModel(t, "f32")
	dev, real := baseDevice(t)
	b, err := cuda.Open(context.Background(), m, cuda.Options{Device: dev})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	bs, _ := b.NewSession(64)
	s := bs.(*cuda.Session)
	prompt := []int{1, 17, 33, 101, 7, 250, 64, 3}
	l, err := s.Forward(prompt, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SubmitGreedyBatch(-1, 2); err == nil {
		t.Fatal("a batch continued after an ordinary step")
	}
	tok := argmax(l)
	b1, err := s.SubmitGreedyBatch(tok, 3)
	if err != nil {
		t.Fatal(err)
	}
	b2, err := s.SubmitGreedyBatch(-1, 4)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DropGreedyBatch(b1); err == nil {
		t.Fatal("dropped a batch that is not the newest")
	}
	ids1, err := s.CollectGreedyBatch(b1)
	if err != nil {
		t.Fatal(err)
	}
	ids2, err := s.CollectGreedyBatch(b2)
	if err != nil {
		t.Fatal(err)
	}
	b3, err := s.SubmitGreedyBatch(-1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DropGreedyBatch(b3); err != nil {
		t.Fatal(err)
	}
	b4, err := s.SubmitGreedyBatch(-1, 2)
	if err != nil {
		t.Fatal(err)
	}
	ids4, err := s.CollectGreedyBatch(b4)
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != len(prompt)+3+4+2 {
		t.Fatalf("Len %d after batches of 3, 4 and 2 (one of 2 dropped)", s.Len())
	}
	if !real {
		return
	}
	got := append(append(ids1, ids2...), ids4...)
	want := cpuContinue(t, m, append(append([]int(nil), prompt...), tok), len(got))
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("picks %v, CPU %v", got, want)
	}
}
