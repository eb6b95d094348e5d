//go:build js

package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"syscall/js"
	"time"

	"github.com/cortiq/cortiq/backend"
	"github.com/cortiq/cortiq/chat"
	"github.com/cortiq/cortiq/engine"
	"github.com/cortiq/cortiq/gpu"
	"github.com/cortiq/cortiq/sample"
)

// pagePrefixCache is the memory (a kept device session counts what it
// holds on the device) the page's kept sessions may take.
const pagePrefixCache = 256 << 20

// genResult is what generate resolves to.
type genResult struct {
	Text         string  `json:"text"`
	IDs          []int   `json:"ids"`
	PromptIDs    []int   `json:"promptIds"`
	Backend      string  `json:"backend"`
	PrefillTokS  float64 `json:"prefillTokS"`
	DecodeTokS   float64 `json:"decodeTokS"`
	FinishReason string  `json:"finishReason"` // length, eos, stop, cancelled
	DeviceError  string  `json:"deviceError,omitempty"`
	Seconds      float64 `json:"seconds"`
	CachedTokens int     `json:"cachedTokens"` // prompt tokens a kept session already held (not prefilled)
}

func (s *state) prompt(r request) ([]int, error) {
	e := s.eng
	if r.IDs != nil {
		return r.IDs, nil
	}
	if len(r.Messages) > 0 {
		msgs := make([]chat.Message, len(r.Messages))
		for i, m := range r.Messages {
			msgs[i] = chat.Message{Role: m.Role, Content: m.Content}
		}
		text, err := e.ChatPrompt(msgs)
		if err != nil {
			return nil, fmt.Errorf("chat template: %w", err)
		}
		return e.EncodeTemplated(text)
	}
	return e.Encode(r.Prompt)
}

func (s *state) generate(ctx context.Context, r request) (*genResult, error) {
	if s.eng == nil {
		return nil, errNoModel
	}
	t0 := time.Now()
	prompt, err := s.prompt(r)
	if err != nil {
		return nil, err
	}
	req := engine.Request{
		IDs:       prompt,
		MaxTokens: r.MaxTokens,
		Sampling: sample.Params{
			Temperature: r.Temperature, TopK: r.TopK, TopP: r.TopP, MinP: r.MinP,
			RepeatPenalty: r.Repeat, PresencePenalty: r.Presence, FrequencyPenalty: r.Frequency, RepeatLastN: r.RepeatLastN, Seed: r.Seed,
		},
		Stop:      r.Stop,
		IgnoreEOS: r.IgnoreEOS,
		Backend:   r.Backend,
	}
	var y yielder
	res, err := s.eng.Generate(ctx, req, func(t engine.Token) error {
		reply(r.ID, "token", map[string]any{"token": t.ID, "text": t.Text, "backend": t.Backend})
		// Let the page's stop request in: the engine checks ctx before
		// the next token.
		y.maybe()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &genResult{
		Text: res.Text, IDs: append([]int{}, res.IDs...), PromptIDs: prompt, Backend: res.Backend,
		PrefillTokS: res.PrefillTokS, DecodeTokS: res.DecodeTokS, FinishReason: res.FinishReason,
		DeviceError: res.DeviceError, Seconds: time.Since(t0).Seconds(), CachedTokens: res.CachedTokens,
	}, nil
}

// logits returns every position's logits of ids as a Float32Array (row
// major, len(ids) x vocab) with the backend that computed them.
func (s *state) logits(ctx context.Context, r request) (js.Value, error) {
	if s.eng == nil {
		return js.Undefined(), errNoModel
	}
	if len(r.IDs) == 0 {
		return js.Undefined(), errors.New("logits: no ids")
	}
	res, err := s.eng.LogitsOn(ctx, r.IDs, r.Backend)
	if err != nil {
		return js.Undefined(), err
	}
	o := js.Global().Get("Object").New()
	o.Set("logits", float32Array(res.Logits))
	o.Set("vocab", s.eng.Model.Arch.Vocab)
	o.Set("positions", len(r.IDs))
	o.Set("backend", res.Backend)
	if res.DeviceError != "" {
		o.Set("deviceError", res.DeviceError)
	}
	return o, nil
}

func float32Array(v []float32) js.Value {
	b := gpu.F32Bytes(v)
	u8 := js.Global().Get("Uint8Array").New(len(b))
	js.CopyBytesToJS(u8, b)
	return js.Global().Get("Float32Array").New(u8.Get("buffer"))
}

// stats reports the loaded model, the backend and the heap.
func (s *state) stats() any {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	out := map[string]any{
		"heapBytes":       ms.HeapAlloc,
		"sysBytes":        ms.Sys,
		"wasmMemoryBytes": wasmMemory(),
		"webgpuAvailable": js.Global().Get("navigator").Get("gpu").Truthy(),
	}
	if ai, err, ok := adapter(); ok {
		if err != nil {
			out["deviceError"] = fmt.Errorf("%w: %v", gpu.ErrNoAdapter, err).Error()
		} else {
			out["adapter"] = ai
		}
	}
	if s.info != nil {
		if s.eng != nil {
			s.fillBackend()
			if st, ok := s.eng.Device().(backend.StatsReporter); ok {
				out["gpu"] = st.Stats()
			}
		}
		out["model"] = s.info
	}
	return out
}
