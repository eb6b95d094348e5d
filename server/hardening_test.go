package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestMaxTokensHugeIsClamped: max_tokens near 2^63 runs to the end of the
// context and returns what it generated ("length"), over HTTP and the
// websocket alike, instead of failing after generating it all.
func TestMaxTokensHugeIsClamped(t *testing.T) {
	e := loadFixture(t, "fixtures/tiny/llama")
	ts := startServer(t, Config{}, map[string]Model{"llama": nopClose{FromEngine(e)}})
	prompt := []int{1, 17, 42, 99, 7}
	want := engineRef(t, e, GenRequest{IDs: prompt, IgnoreEOS: true}) // 0 = to the end of the context
	resp, data := postJSON(t, ts.URL+"/v1/completions", "", map[string]any{"prompt": prompt, "max_tokens": math.MaxInt64, "temperature": 0, "ignore_eos": true})
	if resp.StatusCode != 200 {
		t.Fatalf("HTTP: %d %s", resp.StatusCode, data)
	}
	var out struct {
		Usage   usage
		Choices []struct {
			FinishReason string `json:"finish_reason"`
		}
	}
	jsonUnmarshal(t, data, &out)
	if out.Usage.CompletionTokens != len(want.IDs) || len(out.Choices) != 1 || out.Choices[0].FinishReason != "length" {
		t.Errorf("HTTP: %s; want %d tokens, finish length", data, len(want.IDs))
	}
	c, err := Dial(context.Background(), ts.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res, err := c.Generate(context.Background(), &Msg{IDs: prompt, MaxTokens: math.MaxInt64, IgnoreEOS: true}, nil)
	if err != nil {
		t.Fatalf("websocket: %v", err)
	}
	if len(res.IDs) != len(want.IDs) || res.FinishReason != "length" {
		t.Errorf("websocket: %d tokens, finish %q; want %d, length", len(res.IDs), res.FinishReason, len(want.IDs))
	}
}

// TestGenerateValidation: one validation for both front ends: at most one
// input, sampling parameters in their documented ranges.
func TestGenerateValidation(t *testing.T) {
	fm := &fakeModel{}
	ts := startServer(t, Config{}, map[string]Model{"m": fm})
	ws, _ := dialWS(t, ts.WSURL, nil)
	defer ws.Close()
	bad := []struct {
		msg   Msg
		param string
	}{
		{Msg{Prompt: "x", IDs: []int{1, 2}}, "exclusive"},
		{Msg{Prompt: "x", Messages: []ChatMessage{{"user", "hi"}}}, "exclusive"},
		{Msg{Prompt: "x", TopP: 7}, "top_p"},
		{Msg{Prompt: "x", Temperature: 1e6}, "temperature"},
		{Msg{Prompt: "x", MinP: 1.5}, "min_p"},
		{Msg{Prompt: "x", RepeatPenalty: 1e9}, "repeat_penalty"},
		{Msg{Prompt: "x", PresencePenalty: 50}, "presence_penalty"},
		{Msg{Prompt: "x", FrequencyPenalty: -3}, "frequency_penalty"},
		{Msg{Prompt: "x", Temperature: 1e300}, "temperature"},
	}
	for i, c := range bad {
		m := c.msg
		m.Type, m.ID = "generate", fmt.Sprintf("g%d", i)
		ws.WriteJSON(m)
		r := readMsg(t, ws)
		if r.Type != "error" || r.ID != m.ID || r.Error == nil || !strings.Contains(r.Error.Message, c.param) {
			t.Errorf("websocket %+v: %+v, want an error naming %s", c.msg, r, c.param)
		}
	}
	// Empty lists (which a Msg cannot carry: omitempty).
	for _, raw := range []string{`{"type":"generate","id":"e1","ids":[]}`, `{"type":"generate","id":"e2","messages":[]}`} {
		ws.WriteMessage(websocket.TextMessage, []byte(raw))
		r := readMsg(t, ws)
		if r.Type != "error" || r.Error == nil || !strings.Contains(r.Error.Message, "empty list") {
			t.Errorf("websocket %s: %+v, want an error about the empty list", raw, r)
		}
	}
	httpBad := []struct {
		body  string
		param string
	}{
		{`{"prompt":"x","top_p":7}`, "top_p"},
		{`{"prompt":"x","temperature":1e6}`, "temperature"},
		{`{"prompt":"x","top_k":-1}`, "top_k"},
		{`{"prompt":"x","presence_penalty":3}`, "presence_penalty"},
		{`{"prompt":"x","temperature":1e300}`, "temperature"},
	}
	for _, c := range httpBad {
		resp, data := postJSON(t, ts.URL+"/v1/completions", "", c.body)
		if resp.StatusCode != 400 || !strings.Contains(string(data), `"param":"`+c.param+`"`) {
			t.Errorf("HTTP %s: %d %s, want 400 naming %s", c.body, resp.StatusCode, data, c.param)
		}
	}
	if n := fm.calls.Load(); n != 0 {
		t.Errorf("%d invalid requests reached the model", n)
	}
	// In range, including the values that mean "off", runs.
	ws.WriteJSON(Msg{Type: "generate", ID: "ok", Prompt: "x", MaxTokens: 1, TopP: 1, Temperature: 100, MinP: 1, PresencePenalty: -2})
	if r := readMsg(t, ws); r.Type != "token" {
		t.Errorf("in-range generate: %+v", r)
	}
}

// TestWSAuthFailureCloseReason: a failed auth closes the socket with 1008
// and a reason that says so, not the shutdown's goodbye.
func TestWSAuthFailureCloseReason(t *testing.T) {
	ts := startServer(t, Config{Token: "tok"}, map[string]Model{"m": &fakeModel{}})
	ws, _ := dialWS(t, ts.WSURL, nil)
	defer ws.Close()
	ws.WriteJSON(Msg{Type: "auth", ID: "a", Token: "wrong"})
	if m := readMsg(t, ws); m.Type != "error" || m.Error.Code != "unauthorized" {
		t.Fatalf("wrong token: %+v", m)
	}
	ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, _, err := ws.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.ClosePolicyViolation || !strings.Contains(ce.Text, "auth") || strings.Contains(ce.Text, "shutting down") {
		t.Errorf("close after a failed auth: %v, want code 1008 and a reason about auth", err)
	}
}

// TestOriginChecks: a cross-origin "simple" POST (text/plain, no
// preflight) is refused before it runs, on every route; the origin
// compares scheme, host and port; JSON routes want application/json.
func TestOriginChecks(t *testing.T) {
	fm := &fakeModel{}
	ts := startServer(t, Config{AllowOrigins: []string{"https://app.example"}}, map[string]Model{"m": fm})
	post := func(origin, ctype string) (int, string) {
		req, _ := http.NewRequest("POST", ts.URL+"/v1/completions", strings.NewReader(`{"prompt":"x","max_tokens":1}`))
		req.Header.Set("Content-Type", ctype)
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	own := "http://" + ts.Addr
	for _, c := range []struct {
		origin, ctype string
		status        int
	}{
		{"https://evil.example", "text/plain", 403},
		{"https://evil.example", "application/json", 403},
		{"https://" + ts.Addr, "application/json", 403}, // same host and port, other scheme
		{"http://app.example", "application/json", 403}, // allow-listed host, other scheme
		{"null", "application/json", 403},
		{own, "text/plain", 415},
		{"", "text/plain;charset=UTF-8", 415},
		{"", "application/x-www-form-urlencoded", 415},
		{own, "application/json", 200},
		{own + "/", "application/json; charset=utf-8", 200},
		{"HTTPS://APP.EXAMPLE:443", "application/json", 200},
		{"", "application/json", 200},
	} {
		if st, body := post(c.origin, c.ctype); st != c.status {
			t.Errorf("Origin %q, Content-Type %q: %d %s, want %d", c.origin, c.ctype, st, body, c.status)
		}
	}
	if n := fm.calls.Load(); n != 4 {
		t.Errorf("%d generations ran, want 4 (the allowed requests only)", n)
	}
	// Every route, GETs included, and the websocket compares the scheme.
	for _, path := range []string{"/v1/models", "/healthz", "/metrics"} {
		req, _ := http.NewRequest("GET", ts.URL+path, nil)
		req.Header.Set("Origin", "https://evil.example")
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 403 {
			t.Errorf("GET %s from another origin: %d, want 403", path, resp.StatusCode)
		}
	}
	for origin, ok := range map[string]bool{"https://" + ts.Addr: false, own: true, "ws://" + ts.Addr: false} {
		ws, resp, err := websocket.DefaultDialer.Dial(ts.WSURL, http.Header{"Origin": {origin}})
		if ok != (err == nil) || (!ok && (resp == nil || resp.StatusCode != 403)) {
			t.Errorf("websocket Origin %q: err %v, want ok=%v", origin, err, ok)
		}
		if ws != nil {
			ws.Close()
		}
	}
}

// TestSilentBrowserWorker: a tab that takes a job and never answers fails
// it after WorkerTimeout with worker_timeout (504 over HTTP), and is told
// to cancel it; its load jobs likewise.
func TestSilentBrowserWorker(t *testing.T) {
	ts := startServer(t, Config{WorkerTimeout: 300 * time.Millisecond}, map[string]Model{})
	tab, _ := dialWS(t, ts.WSURL+"?role=worker", nil)
	defer tab.Close()
	tab.WriteJSON(Msg{Type: "register", ID: "r", Models: []string{"mute"}})
	if m := readMsg(t, tab); m.Type != "registered" {
		t.Fatalf("register: %+v", m)
	}
	seen := make(chan Msg, 100)
	go func() { // reads the jobs, answers none
		for {
			var m Msg
			if err := tab.ReadJSON(&m); err != nil {
				close(seen)
				return
			}
			seen <- m
		}
	}()
	resp, data := postJSON(t, ts.URL+"/v1/completions", "", `{"model":"mute","prompt":"x","max_tokens":2}`)
	if resp.StatusCode != 504 || !strings.Contains(string(data), "worker_timeout") {
		t.Errorf("HTTP to a silent tab: %d %s, want 504 worker_timeout", resp.StatusCode, data)
	}
	c, err := Dial(context.Background(), ts.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Generate(context.Background(), &Msg{Model: "mute", Prompt: "x"}, nil)
	var re *RemoteError
	if !errors.As(err, &re) || re.Code != "worker_timeout" {
		t.Errorf("websocket to a silent tab: %v, want worker_timeout", err)
	}
	workers, err := c.Workers(context.Background())
	if err != nil || len(workers) != 1 {
		t.Fatalf("workers: %v %v", workers, err)
	}
	_, err = c.Load(context.Background(), workers[0].ID, "other", nil)
	if !errors.As(err, &re) || re.Code != "worker_timeout" {
		t.Errorf("load on a silent tab: %v, want worker_timeout", err)
	}
	// The tab was asked to cancel each job it left hanging.
	jobs, cancels := map[string]bool{}, map[string]bool{}
	for len(cancels) < 3 {
		select {
		case m := <-seen:
			switch m.Type {
			case "generate", "load":
				jobs[m.ID] = true
			case "cancel":
				cancels[m.ID] = true
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("jobs %v, cancels %v: want a cancel for each of 3 jobs", jobs, cancels)
		}
	}
	for id := range cancels {
		if !jobs[id] {
			t.Errorf("cancel for unknown job %s", id)
		}
	}
}
