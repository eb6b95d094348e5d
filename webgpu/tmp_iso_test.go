package webgpu

import (
	"os"
	"strconv"
	"testing"

	"github.com/cortiq/cortiq/tensor"
)

func TestIso(t *testing.T) {
	if os.Getenv("ISO") == "" {
		t.Skip()
	}
	a := func(k string) int { v, _ := strconv.Atoi(os.Getenv(k)); return v }
	d := testDevice(t)
	m := synthetic(t, tensor.F16, a("V"), a("H"), a("F"), a("L"), a("NH"), a("KV"))
	b, err := New(m, Options{Device: d})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	s, err := b.newSession(a("ML"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Forward([]int{1, 2, 3, 4}[:a("PN")], false); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < a("STEPS"); i++ {
		t.Log("step", i)
		if _, err := s.Forward([]int{5}, false); err != nil {
			t.Fatal(err)
		}
	}
}
