package webgpu

import (
	"os"
	"math/rand/v2"
	"testing"

	"github.com/cortiq/cortiq/shaders"
	"github.com/cortiq/cortiq/tensor"
)

func TestStressWide(t *testing.T) {
	k := newKT(t)
	r := rand.New(rand.NewPCG(1, 2))
	const rows, cols = 70000, 256
	data, soff, w := encodeWeight(t, tensor.Q8_0, rows, cols, randVec(r, rows*cols, 1))
	wb := k.storage(data)
	x := randVec(r, cols, 1)
	want := make([]float32, rows)
	for o := range want {
		var s float32
		for i := 0; i < cols; i++ {
			s += w[o*cols+i] * x[i]
		}
		want[o] = s
	}
	src, _ := shaders.Matmul(tensor.Q8_0, 1)
	for it := 0; it < 10; it++ {
		out := k.zeros(rows)
		k.run("matmul/q8_0/tb1", src, kindsMatmul, [3]uint32{65535, 2, 1},
			k.uniform(rows, cols, soff, 0, float32(1), float32(0), 0, 0, rows, 0), k.step(0, 1, 0, 1), wb, k.f32(x), out, k.zeros(4))
		closeTo(t, "y", k.read(out, rows), want, 1e-3)
	}
}

func TestStressWideModel(t *testing.T) {
	d := testDevice(t)
	m := synthetic(t, tensor.Q8_0, 70000, 256, 256, 1, 1, 1)
	b, err := New(m, Options{Device: d})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var first []float32
	for it := 0; it < 8; it++ {
		s, err := b.newSession(8)
		if err != nil {
			t.Fatal(err)
		}
		l, err := s.Forward([]int{69999, 3}, false)
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = l
		}
		dd, at := maxAbsDiff(l, first)
		t.Logf("iter %d: diff %g at %d; l[0]=%g l[69999]=%g", it, dd, at, l[0], l[69999])
		if os.Getenv("NOCLOSE") == "" {
			s.Close()
		}
	}
}
