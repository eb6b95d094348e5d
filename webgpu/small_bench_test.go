package webgpu

import (
	"fmt"
	"testing"

	"github.com/cortiq/cortiq/tensor"
)

// BenchmarkVerifyStep times speculative verification's step against a
// decode step at a depth of 256 positions on the q4_0 benchmark model:
// "decode" is one greedy step with its readback (ForwardGreedy, not
// pipelined; "decode-8" eight in one submit, ns/token the rate a pipelined
// plain decode approaches), "verify-N" a VerifyGreedy of N tokens (the last token and
// N-1 drafts) then a Rewind of them, as a speculative step that accepts
// nothing leaves it; "-off" runs the prefill kernels (Tuning.SmallSteps
// "off"), the path before small steps. The aim: verify-5 close to
// decode. On the GPU machine:
//
//	CORTIQ_BENCH_DIMS=2048,8192,16,32,8,128256 webgpu.test -test.run XXX -test.bench VerifyStep -test.benchtime 200x
func BenchmarkVerifyStep(b *testing.B) {
	d := testDevice(b)
	m := benchModel(b, tensor.Q4_0)
	prompt := make([]int, 256)
	for i := range prompt {
		prompt[i] = (7*i + 1) % m.Arch.Vocab
	}
	for _, tune := range []Tuning{{}, {SmallSteps: "off"}} {
		be, err := New(m, Options{Device: d, Tuning: tune})
		if err != nil {
			b.Fatal(err)
		}
		s, err := be.newSession(len(prompt) + 32)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Forward(prompt, false); err != nil {
			b.Fatal(err)
		}
		suffix := ""
		if tune.SmallSteps == "off" {
			suffix = "-off"
		} else {
			for _, k := range []int{1, 8} {
				name := "decode"
				if k > 1 {
					name = fmt.Sprintf("decode-%d", k)
				}
				b.Run(name, func(b *testing.B) {
					for range b.N {
						if _, err := s.ForwardGreedy(3, k); err != nil {
							b.Fatal(err)
						}
						if err := s.Rewind(k); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*k), "ns/token")
				})
			}
		}
		for _, n := range []int{2, 5, 9} {
			tokens := prompt[:n]
			if err := s.PrepareVerify(n); err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("verify-%d%s", n, suffix), func(b *testing.B) {
				for range b.N {
					if _, err := s.VerifyGreedy(tokens); err != nil {
						b.Fatal(err)
					}
					if err := s.Rewind(n); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		s.Close()
		be.Close()
	}
}
