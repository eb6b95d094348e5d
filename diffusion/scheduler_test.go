package diffusion

import (
	"math"
	"testing"
)

// TestSchedulerByHand checks the schedules against values worked out by
// hand: shift 3 over 2 steps, the dynamic shift at the base sequence
// length, a shift_terminal stretch, and one Euler step.
func TestSchedulerByHand(t *testing.T) {
	s, err := ParseScheduler([]byte(`{"num_train_timesteps": 1000, "shift": 3.0, "use_dynamic_shifting": false}`))
	if err != nil {
		t.Fatal(err)
	}
	sig, ts, err := s.Sigmas(2, 64)
	if err != nil {
		t.Fatal(err)
	}
	// linspace(1, 1/2, 2) = [1, 0.5]; 3σ/(1+2σ) = [1, 0.75]; then the terminal 0.
	want := []float32{1, 0.75, 0}
	for i := range want {
		if sig[i] != want[i] {
			t.Errorf("sigma[%d] = %v, want %v", i, sig[i], want[i])
		}
	}
	if ts[0] != 1000 || ts[1] != 750 {
		t.Errorf("timesteps %v, want [1000 750]", ts)
	}

	// Dynamic: at seq = base_image_seq_len, mu = base_shift = 0.5, and
	// σ' = e^mu / (e^mu + 1/σ - 1): σ = 1 stays 1, σ = 0.5 gives e^0.5/(e^0.5+1).
	d, err := ParseScheduler([]byte(`{"use_dynamic_shifting": true}`))
	if err != nil {
		t.Fatal(err)
	}
	if mu := d.Mu(256); math.Abs(mu-0.5) > 1e-12 {
		t.Errorf("mu(256) = %v, want 0.5", mu)
	}
	if mu := d.Mu(4096); math.Abs(mu-1.15) > 1e-12 {
		t.Errorf("mu(4096) = %v, want 1.15", mu)
	}
	sig, _, err = d.Sigmas(2, 256)
	if err != nil {
		t.Fatal(err)
	}
	e := math.Exp(0.5)
	if sig[0] != 1 || math.Abs(float64(sig[1])-e/(e+1)) > 1e-7 || sig[2] != 0 {
		t.Errorf("dynamic sigmas %v, want [1 %v 0]", sig, e/(e+1))
	}

	// shift_terminal 0.5 stretches [1, 0.75] so the last is 0.5:
	// 1 - (1-σ)/((1-0.75)/(1-0.5)) = [1, 0.5].
	st, err := ParseScheduler([]byte(`{"shift": 3.0, "shift_terminal": 0.5}`))
	if err != nil {
		t.Fatal(err)
	}
	sig, _, _ = st.Sigmas(2, 64)
	if sig[0] != 1 || sig[1] != 0.5 {
		t.Errorf("shift_terminal sigmas %v, want [1 0.5 0]", sig)
	}

	x := []float32{1, -2}
	Step(x, []float32{2, 4}, 1, 0.75)
	if x[0] != 0.5 || x[1] != -3 {
		t.Errorf("Euler step gave %v, want [0.5 -3]", x)
	}

	// torch.linspace in float32 counts the second half from the end.
	l := linspace32(1, 0.2, 5)
	for i, w := range []float32{1, 0.8, 0.6, 0.4, 0.2} {
		if math.Abs(float64(l[i]-w)) > 1e-7 {
			t.Errorf("linspace[%d] = %v, want %v", i, l[i], w)
		}
	}
	if l[4] != 0.2 || l[0] != 1 {
		t.Errorf("linspace ends %v, %v: want exactly 1 and 0.2", l[0], l[4])
	}
}

// TestSchedulerRefusals: options this scheduler does not implement are
// refused, not ignored.
func TestSchedulerRefusals(t *testing.T) {
	for _, cfg := range []string{
		`{"use_karras_sigmas": true}`,
		`{"use_beta_sigmas": true}`,
		`{"invert_sigmas": true}`,
		`{"stochastic_sampling": true}`,
		`{"time_shift_type": "cubic"}`,
		`{"num_train_timesteps": 0}`,
		`{"shift_terminal": 1.5}`,
		`[1, 2]`,
	} {
		if _, err := ParseScheduler([]byte(cfg)); err == nil {
			t.Errorf("%s: no error", cfg)
		}
	}
	s, _ := ParseScheduler([]byte(`{}`))
	if _, _, err := s.Sigmas(0, 16); err == nil {
		t.Errorf("0 steps: no error")
	}
}
