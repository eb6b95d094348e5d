//go:build js

package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"syscall/js"
	"time"

	"github.com/cortiq/cortiq/backend"
	"github.com/cortiq/cortiq/chat"
	"github.com/cortiq/cortiq/cpu"
	"github.com/cortiq/cortiq/engine"
	"github.com/cortiq/cortiq/sample"
	"github.com/cortiq/cortiq/webgpu"
)

// cpuBackend returns the CPU engine, building it on first use (when the
// GPU holds the model, the CPU copy is only made if it is needed).
func (s *state) cpuBackend() (backend.Backend, error) {
	if s.cpu != nil {
		return s.cpu, nil
	}
	c, err := cpu.New(s.m, cpu.Options{})
	if err != nil {
		return nil, fmt.Errorf("cpu: %w", weightsErr(s.m, err))
	}
	s.cpu = c
	return c, nil
}

// seq is one sequence: on the GPU while it works, then on the CPU for good
// after the first device failure, which replays every position so far so
// the tokens continue exactly as a CPU run would (the engine facade's
// policy, see package engine).
type seq struct {
	s        *state
	maxLen   int
	cur      backend.Session
	onDevice bool
	history  []int
	devErr   error
}

func (s *state) newSeq(want string, maxLen int) (*seq, error) {
	q := &seq{s: s, maxLen: maxLen}
	if want != "cpu" && s.gpu != nil {
		ds, err := s.gpu.NewSession(maxLen)
		if err == nil {
			q.cur, q.onDevice = ds, true
			return q, nil
		}
		q.devErr = err
	}
	c, err := s.cpuBackend()
	if err != nil {
		return nil, err
	}
	cs, err := c.NewSession(maxLen)
	if err != nil {
		return nil, err
	}
	q.cur = cs
	return q, nil
}

func (q *seq) forward(tokens []int, all bool) ([]float32, error) {
	if len(q.history)+len(tokens) > q.maxLen {
		return nil, fmt.Errorf("%d positions exceed the context of %d", len(q.history)+len(tokens), q.maxLen)
	}
	out, err := q.cur.Forward(tokens, all)
	if err == nil {
		q.history = append(q.history, tokens...)
		return out, nil
	}
	if !q.onDevice {
		return nil, err
	}
	q.devErr = fmt.Errorf("the GPU failed mid-generation, continued on the CPU: %w", err)
	q.cur.Close()
	q.onDevice = false
	c, cerr := q.s.cpuBackend()
	if cerr != nil {
		return nil, errors.Join(err, cerr)
	}
	cs, cerr := c.NewSession(q.maxLen)
	if cerr != nil {
		return nil, errors.Join(err, cerr)
	}
	q.cur = cs
	if len(q.history) > 0 {
		if _, err := cs.Forward(q.history, false); err != nil {
			return nil, err
		}
	}
	out, err = cs.Forward(tokens, all)
	if err != nil {
		return nil, err
	}
	q.history = append(q.history, tokens...)
	return out, nil
}

func (q *seq) name() string {
	if q.onDevice {
		return q.s.gpu.Name()
	}
	return "cpu"
}

func (q *seq) close() { q.cur.Close() }

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
}

func (s *state) prompt(r request) ([]int, error) {
	if r.IDs != nil {
		return r.IDs, nil
	}
	if s.tok == nil {
		return nil, errors.New("the model has no tokenizer: pass token ids")
	}
	if len(r.Messages) > 0 {
		tmpl, ok := s.tok.ChatTemplate("")
		if !ok || tmpl == "" {
			tmpl = chatML
		}
		msgs := make([]chat.Message, len(r.Messages))
		for i, m := range r.Messages {
			msgs[i] = chat.Message{Role: m.Role, Content: m.Content}
		}
		text, err := chat.Render(tmpl, msgs, chat.Options{
			AddGenerationPrompt: true,
			BOSToken:            s.tok.Token(s.tok.BOS()),
			EOSToken:            s.tok.Token(s.tok.EOS()),
		})
		if err != nil {
			return nil, fmt.Errorf("chat template: %w", err)
		}
		return s.tok.Encode(text, false), nil
	}
	return s.tok.Encode(r.Prompt, true), nil
}

// chatML is used for models that ship no template (as the engine does).
const chatML = `{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}`

func (s *state) isEOS(id int) bool {
	if s.tok != nil && s.tok.IsEOS(id) {
		return true
	}
	for _, e := range s.m.Arch.EOS {
		if e == id {
			return true
		}
	}
	return false
}

func (s *state) maxContext() int {
	n := s.m.Arch.Context
	if n <= 0 || n > 4096 {
		n = 4096
	}
	return n
}

func (s *state) generate(ctx context.Context, r request) (*genResult, error) {
	if s.m == nil {
		return nil, errNoModel
	}
	t0 := time.Now()
	prompt, err := s.prompt(r)
	if err != nil {
		return nil, err
	}
	if len(prompt) == 0 {
		return nil, errors.New("empty prompt")
	}
	vocab := s.m.Arch.Vocab
	for _, id := range prompt {
		if id < 0 || id >= vocab {
			return nil, fmt.Errorf("token id %d outside the vocabulary (0..%d)", id, vocab-1)
		}
	}
	maxCtx := s.maxContext()
	if len(prompt) >= maxCtx {
		return nil, fmt.Errorf("prompt of %d tokens does not fit the context of %d", len(prompt), maxCtx)
	}
	maxNew := r.MaxTokens
	if maxNew <= 0 || len(prompt)+maxNew > maxCtx {
		maxNew = maxCtx - len(prompt)
	}
	q, err := s.newSeq(r.Backend, len(prompt)+maxNew)
	if err != nil {
		return nil, err
	}
	defer q.close()

	res := &genResult{PromptIDs: prompt, FinishReason: "length", IDs: []int{}}
	smp := sample.New(sample.Params{
		Temperature: r.Temperature, TopK: r.TopK, TopP: r.TopP, MinP: r.MinP,
		RepeatPenalty: r.Repeat, Seed: r.Seed,
	})
	history := append([]int(nil), prompt...)
	var text strings.Builder
	stops := engine.NewStopMatcher(r.Stop)
	var dec interface{ Next(int) string }
	if s.tok != nil {
		dec = s.tok.NewStreamDecoder()
	}
	var y yielder
	tp := time.Now()
	logits, err := q.forward(prompt, false)
	if err != nil {
		return nil, err
	}
	res.PrefillTokS = float64(len(prompt)) / time.Since(tp).Seconds()
	td := time.Now()
	decoded := 0
	for n := 0; n < maxNew; n++ {
		if ctx.Err() != nil {
			res.FinishReason = "cancelled"
			break
		}
		id := smp.Sample(logits, history)
		history = append(history, id)
		res.IDs = append(res.IDs, id)
		piece := ""
		if dec != nil {
			piece = dec.Next(id)
		}
		eos := !r.IgnoreEOS && s.isEOS(id)
		emit, stopped := stops.Push(piece)
		if eos {
			emit += stops.Flush()
		}
		text.WriteString(emit)
		if !eos || emit != "" {
			reply(r.ID, "token", map[string]any{"token": id, "text": emit, "backend": q.name()})
		}
		if stopped {
			res.FinishReason = "stop"
			break
		}
		if eos {
			res.FinishReason = "eos"
			break
		}
		if n == maxNew-1 {
			break
		}
		// Let the page's stop request in.
		y.maybe()
		if ctx.Err() != nil {
			res.FinishReason = "cancelled"
			break
		}
		logits, err = q.forward([]int{id}, false)
		if err != nil {
			return nil, err
		}
		decoded++
	}
	if res.FinishReason == "length" || res.FinishReason == "cancelled" {
		text.WriteString(stops.Flush())
	}
	if decoded > 0 {
		res.DecodeTokS = float64(decoded) / time.Since(td).Seconds()
	}
	res.Text = text.String()
	res.Backend = q.name()
	if q.devErr != nil {
		res.DeviceError = q.devErr.Error()
	} else if !q.onDevice && s.info != nil {
		res.DeviceError = s.info.DeviceError
	}
	res.Seconds = time.Since(t0).Seconds()
	return res, nil
}

// logits returns every position's logits of ids as a Float32Array (row
// major, len(ids) x vocab) with the backend that computed them.
func (s *state) logits(ctx context.Context, r request) (js.Value, error) {
	if s.m == nil {
		return js.Undefined(), errNoModel
	}
	if len(r.IDs) == 0 {
		return js.Undefined(), errors.New("logits: no ids")
	}
	vocab := s.m.Arch.Vocab
	for _, id := range r.IDs {
		if id < 0 || id >= vocab {
			return js.Undefined(), fmt.Errorf("token id %d outside the vocabulary (0..%d)", id, vocab-1)
		}
	}
	q, err := s.newSeq(r.Backend, len(r.IDs)+1)
	if err != nil {
		return js.Undefined(), err
	}
	defer q.close()
	out, err := q.forward(r.IDs, true)
	if err != nil {
		return js.Undefined(), err
	}
	arr := float32Array(out)
	o := js.Global().Get("Object").New()
	o.Set("logits", arr)
	o.Set("vocab", vocab)
	o.Set("positions", len(r.IDs))
	o.Set("backend", q.name())
	if q.devErr != nil {
		o.Set("deviceError", q.devErr.Error())
	}
	return o, nil
}

func float32Array(v []float32) js.Value {
	b := webgpu.F32Bytes(v)
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
	if s.devTried {
		if s.devErr != nil {
			out["deviceError"] = s.devErr.Error()
		} else {
			out["adapter"] = s.dev.Info()
		}
	}
	if s.info != nil {
		s.fillBackend()
		out["model"] = s.info
		if st, ok := any(s.gpu).(backend.StatsReporter); ok && s.gpu != nil {
			out["gpu"] = st.Stats()
		}
	}
	return out
}
