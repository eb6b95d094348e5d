package diffusion

import (
	"encoding/json"
	"fmt"
	"math"
)

// Scheduler is diffusers' FlowMatchEulerDiscreteScheduler as ZImagePipeline
// drives it: sigmas linspace(1, 1/n, n), shifted (a fixed shift, or the
// resolution-dependent one when use_dynamic_shifting is set), a terminal 0
// appended; each step is x ← x + (σ_next − σ)·v. Arithmetic is float32 in
// the order numpy and torch use, so sigmas match to the last bit or so.
type Scheduler struct {
	NumTrainTimesteps int     `json:"num_train_timesteps"`
	Shift             float64 `json:"shift"`
	DynamicShifting   bool    `json:"use_dynamic_shifting"`
	BaseShift         float64 `json:"base_shift"`
	MaxShift          float64 `json:"max_shift"`
	BaseImageSeqLen   int     `json:"base_image_seq_len"`
	MaxImageSeqLen    int     `json:"max_image_seq_len"`
	TimeShiftType     string  `json:"time_shift_type"`
	ShiftTerminal     float64 `json:"shift_terminal"`

	InvertSigmas       bool `json:"invert_sigmas"`
	KarrasSigmas       bool `json:"use_karras_sigmas"`
	ExponentialSigmas  bool `json:"use_exponential_sigmas"`
	BetaSigmas         bool `json:"use_beta_sigmas"`
	StochasticSampling bool `json:"stochastic_sampling"`
}

// isSchedulerConfig tells a flow-matching scheduler config by its contents.
func isSchedulerConfig(raw map[string]json.RawMessage) bool {
	_, a := raw["num_train_timesteps"]
	_, b := raw["shift"]
	_, c := raw["use_dynamic_shifting"]
	return a && (b || c)
}

// ParseScheduler reads scheduler_config.json, with diffusers' defaults for
// absent keys. Options this implementation does not have are refused.
func ParseScheduler(b []byte) (Scheduler, error) {
	s := Scheduler{NumTrainTimesteps: 1000, Shift: 1, BaseShift: 0.5, MaxShift: 1.15,
		BaseImageSeqLen: 256, MaxImageSeqLen: 4096, TimeShiftType: "exponential"}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, err
	}
	switch {
	case s.NumTrainTimesteps <= 0:
		return s, fmt.Errorf("num_train_timesteps %d", s.NumTrainTimesteps)
	case s.KarrasSigmas || s.ExponentialSigmas || s.BetaSigmas:
		return s, fmt.Errorf("karras/exponential/beta sigmas are not supported")
	case s.InvertSigmas:
		return s, fmt.Errorf("invert_sigmas is not supported")
	case s.StochasticSampling:
		return s, fmt.Errorf("stochastic_sampling is not supported")
	case s.TimeShiftType != "exponential" && s.TimeShiftType != "linear":
		return s, fmt.Errorf("time_shift_type %q", s.TimeShiftType)
	case s.ShiftTerminal < 0 || s.ShiftTerminal >= 1:
		return s, fmt.Errorf("shift_terminal %g outside [0, 1)", s.ShiftTerminal)
	case s.DynamicShifting && s.MaxImageSeqLen == s.BaseImageSeqLen:
		return s, fmt.Errorf("base_image_seq_len equals max_image_seq_len")
	}
	return s, nil
}

// Mu is the pipeline's resolution-dependent shift (calculate_shift) for an
// image of seqLen transformer tokens.
func (s *Scheduler) Mu(seqLen int) float64 {
	m := (s.MaxShift - s.BaseShift) / float64(s.MaxImageSeqLen-s.BaseImageSeqLen)
	b := s.BaseShift - m*float64(s.BaseImageSeqLen)
	return float64(seqLen)*m + b
}

// linspace32 is torch.linspace(start, end, n) in float32: the first half
// counted from start, the second from end.
func linspace32(start, end float32, n int) []float32 {
	out := make([]float32, n)
	if n == 1 {
		out[0] = start
		return out
	}
	step := (end - start) / float32(n-1)
	half := n / 2
	for i := range n {
		if i < half {
			out[i] = start + step*float32(i)
		} else {
			out[i] = end - step*float32(n-1-i)
		}
	}
	return out
}

// Sigmas returns the n+1 sigmas (the last 0) and the n timesteps
// (σ·num_train_timesteps) for n steps on an image of seqLen tokens.
func (s *Scheduler) Sigmas(n, seqLen int) (sigmas, timesteps []float32, err error) {
	if n <= 0 {
		return nil, nil, fmt.Errorf("scheduler: %d steps", n)
	}
	sig := linspace32(1, float32(1/float64(n)), n) // get_default_z_image_sigmas
	if s.DynamicShifting {
		mu := s.Mu(seqLen)
		e := float32(math.Exp(mu))
		if s.TimeShiftType == "linear" {
			e = float32(mu)
		}
		for i, t := range sig {
			sig[i] = e / (e + (1/t - 1))
		}
	} else {
		sh, sh1 := float32(s.Shift), float32(s.Shift-1)
		for i, t := range sig {
			sig[i] = sh * t / (1 + sh1*t)
		}
	}
	if s.ShiftTerminal > 0 {
		scale := (1 - sig[n-1]) / float32(1-s.ShiftTerminal)
		for i, t := range sig {
			sig[i] = 1 - (1-t)/scale
		}
	}
	timesteps = make([]float32, n)
	for i, t := range sig {
		timesteps[i] = t * float32(s.NumTrainTimesteps)
	}
	return append(sig, 0), timesteps, nil
}

// Step is one Euler step in place: sample += (σ_next − σ)·v.
func Step(sample, v []float32, sigma, sigmaNext float32) {
	dt := sigmaNext - sigma
	for i := range sample {
		sample[i] += dt * v[i]
	}
}
