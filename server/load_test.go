package server

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// loadSpec describes a load test: request i of the websocket clients and
// of the SSE streams, and the reference output of a request.
type loadSpec struct {
	nWS, nSSE int
	wsReq     func(i int) GenRequest
	sseBody   func(i int) (map[string]any, GenRequest)
	ref       func(GenRequest) *Result
}

type loadStats struct {
	ttft   []time.Duration
	tokens int
	wall   time.Duration
}

func (st *loadStats) report(t *testing.T, label string) {
	slices.Sort(st.ttft)
	t.Logf("%s: %d streams, %d tokens in %v: %.0f tok/s aggregate; TTFT p50 %v p99 %v max %v",
		label, len(st.ttft), st.tokens, st.wall.Round(time.Millisecond), float64(st.tokens)/st.wall.Seconds(),
		percentile(st.ttft, 0.5).Round(time.Microsecond), percentile(st.ttft, 0.99).Round(time.Microsecond),
		st.ttft[len(st.ttft)-1].Round(time.Microsecond))
}

// runLoad runs every websocket client (one connection each) and SSE stream
// at once and checks each stream against its own reference: no lost,
// duplicated or crossed tokens.
func runLoad(t *testing.T, ts *testServer, spec loadSpec) *loadStats {
	refs := make([]*Result, spec.nWS)
	for i := range refs {
		refs[i] = spec.ref(spec.wsReq(i))
	}
	sseRefs := make([]*Result, spec.nSSE)
	for i := range sseRefs {
		_, g := spec.sseBody(i)
		sseRefs[i] = spec.ref(g)
	}
	// Connect everyone first, so that the generations overlap.
	clients := make([]*Client, spec.nWS)
	for i := range clients {
		c, err := Dial(context.Background(), ts.URL, "")
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		clients[i] = c
	}
	var (
		mu    sync.Mutex
		st    = &loadStats{}
		wg    sync.WaitGroup
		start = make(chan struct{})
	)
	record := func(ttft time.Duration, n int) {
		mu.Lock()
		st.ttft = append(st.ttft, ttft)
		st.tokens += n
		mu.Unlock()
	}
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			req := spec.wsReq(i)
			t0 := time.Now()
			var ttft time.Duration
			var ids []int
			var text strings.Builder
			res, err := c.Generate(context.Background(), generateMsg("", req), func(tk Token) error {
				if ids == nil {
					ttft = time.Since(t0)
				}
				ids = append(ids, tk.ID)
				text.WriteString(tk.Text)
				return nil
			})
			if err != nil {
				t.Errorf("ws client %d: %v", i, err)
				return
			}
			want := refs[i]
			if !slices.Equal(ids, want.IDs) || text.String() != want.Text || !slices.Equal(res.IDs, want.IDs) {
				t.Errorf("ws client %d: got %v %q, want %v %q", i, ids, text.String(), want.IDs, want.Text)
			}
			record(ttft, len(ids))
		}()
	}
	for i := 0; i < spec.nSSE; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			body, _ := spec.sseBody(i)
			data, _ := json.Marshal(body)
			t0 := time.Now()
			resp, err := httpClient.Post(ts.URL+"/v1/completions", "application/json", strings.NewReader(string(data)))
			if err != nil {
				t.Errorf("sse %d: %v", i, err)
				return
			}
			defer resp.Body.Close()
			var ttft time.Duration
			var text strings.Builder
			var u *usage
			dec := newSSEReader(resp.Body)
			for {
				ev, err := dec.next()
				if err != nil {
					t.Errorf("sse %d: %v", i, err)
					return
				}
				if ttft == 0 {
					ttft = time.Since(t0)
				}
				if ev == "[DONE]" {
					break
				}
				var c chunk
				if err := json.Unmarshal([]byte(ev), &c); err != nil {
					t.Errorf("sse %d: %q: %v", i, ev, err)
					return
				}
				if c.Usage != nil {
					u = c.Usage
				}
				for _, ch := range c.Choices {
					text.WriteString(ch.Text)
				}
			}
			want := sseRefs[i]
			if text.String() != want.Text || u == nil || u.CompletionTokens != len(want.IDs) {
				t.Errorf("sse %d: got %q usage %+v, want %q (%d tokens)", i, text.String(), u, want.Text, len(want.IDs))
			}
			record(ttft, len(want.IDs))
		}()
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	st.wall = time.Since(t0)
	for _, c := range clients {
		c.Close()
	}
	return st
}

func TestLoadFake(t *testing.T) {
	if testing.Short() {
		t.Skip("load test: skipped with -short")
	}
	before := runtime.NumGoroutine()
	fm := &fakeModel{delay: time.Millisecond}
	ts := startServer(t, Config{MaxActive: 256}, map[string]Model{"m": fm})
	st := runLoad(t, ts, loadSpec{
		nWS: 100, nSSE: 20,
		wsReq: func(i int) GenRequest { return GenRequest{Prompt: fmt.Sprintf("client %d", i), MaxTokens: 32} },
		sseBody: func(i int) (map[string]any, GenRequest) {
			p := fmt.Sprintf("stream %d", i)
			return map[string]any{"prompt": p, "max_tokens": 32, "temperature": 0, "stream": true,
				"stream_options": map[string]any{"include_usage": true}}, GenRequest{Prompt: p, MaxTokens: 32}
		},
		// The same outputs without the delay.
		ref: func(g GenRequest) *Result { return reference(t, &fakeModel{}, g) },
	})
	st.report(t, "fake model (1 ms/token)")
	ts.shutdown(t)
	checkGoroutines(t, before)
}
