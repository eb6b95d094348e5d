package cuda_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cortiq/cortiq/cuda"
	"github.com/cortiq/cortiq/cuda/driver"
)

// kernelLog is a device that records the kernels the backend loads (each
// name once, on first use).
type kernelLog struct {
	driver.Device
	mu    sync.Mutex
	names []string
}

func (k *kernelLog) Function(m driver.Module, name string) (driver.Func, error) {
	k.mu.Lock()
	k.names = append(k.names, name)
	k.mu.Unlock()
	return k.Device.Function(m, name)
}

func (k *kernelLog) has(prefix string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.ContainsFunc(k.names, func(n string) bool { return strings.HasPrefix(n, prefix) })
}

// TestPrefillKernels: a prompt of quantized weights runs its products on
// the int8 tensor cores (ck_quant_q8, ck_mmq*) and its attention in
// ck_flash_prefill_*; Exact keeps the f16 GEMM and the exact attention;
// f32 weights keep the batched matvecs. CPU-only (a fake device).
func TestPrefillKernels(t *testing.T) {
	for _, c := range []struct {
		mix        string
		exact      bool
		want, none []string
	}{
		{"q4_0", false, []string{"ck_quant_q8", "ck_mmq", "ck_flash_prefill_f32_64"}, []string{"ck_gemm_", "ck_act_mul", "ck_attn_prefill_"}},
		{"q4_K_M", false, []string{"ck_quant_q8", "ck_mmq", "ck_flash_prefill_f32_64"}, []string{"ck_gemm_"}},
		{"q4_0", true, []string{"ck_gemm_q4_0", "ck_act_mul", "ck_attn_prefill_f32"}, []string{"ck_quant_q8", "ck_mmq", "ck_flash_"}},
		{"f32", false, []string{"ck_mvb_f32"}, []string{"ck_quant_q8", "ck_mmq", "ck_gemm_"}},
	} {
		m := synthModel(t, c.mix)
		dev := &kernelLog{Device: driver.NewFake(1 << 30)}
		b, err := cuda.Open(context.Background(), m, cuda.Options{Device: dev, Exact: c.exact})
		if err != nil {
			t.Fatal(err)
		}
		s, err := b.NewSession(64)
		if err != nil {
			t.Fatal(err)
		}
		ids := make([]int, 40)
		for i := range ids {
			ids[i] = i
		}
		if _, err := s.Forward(ids, false); err != nil {
			t.Fatal(err)
		}
		for _, w := range c.want {
			if !dev.has(w) {
				t.Errorf("%s exact=%v: no %s* kernel in %v", c.mix, c.exact, w, dev.names)
			}
		}
		for _, n := range c.none {
			if dev.has(n) {
				t.Errorf("%s exact=%v: a %s* kernel ran: %v", c.mix, c.exact, n, dev.names)
			}
		}
		s.Close()
		b.Close()
	}
}
