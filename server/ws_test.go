package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cortiq/cortiq/sample"
	"github.com/gorilla/websocket"
)

func TestWSHelloAndBasics(t *testing.T) {
	fm := &fakeModel{}
	ts := startServer(t, Config{}, map[string]Model{"m": fm})
	ws, hello := dialWS(t, ts.WSURL, nil)
	defer ws.Close()
	if hello.Protocol != ProtocolVersion || hello.Server == nil || hello.Server.Name != "cortiq" || hello.AuthRequired ||
		len(hello.Server.Models) != 1 || hello.Role != "client" {
		t.Fatalf("hello %+v", hello)
	}
	ws.WriteJSON(Msg{Type: "ping", ID: "p1"})
	if m := readMsg(t, ws); m.Type != "pong" || m.ID != "p1" || m.Time == 0 {
		t.Errorf("pong %+v", m)
	}
	ws.WriteJSON(Msg{Type: "workers", ID: "w"})
	if m := readMsg(t, ws); m.Type != "workers" || len(m.Workers) != 1 || m.Workers[0].Kind != "native" || m.Workers[0].Models[0] != "m" {
		t.Errorf("workers %+v", m)
	}
	ws.WriteJSON(Msg{Type: "stats", ID: "s"})
	if m := readMsg(t, ws); m.Type != "stats" || m.Stats == nil || m.Stats.Connections != 1 {
		t.Errorf("stats %+v", m)
	}
	ws.WriteJSON(Msg{Type: "frobnicate", ID: "f"})
	if m := readMsg(t, ws); m.Type != "error" || m.Error.Code != "unknown_type" || m.ID != "f" {
		t.Errorf("unknown type: %+v", m)
	}

	// Two generations interleaved on one connection, each complete.
	reqs := map[string]GenRequest{"a": {Prompt: "first", MaxTokens: 9}, "b": {IDs: []int{5, 6}, MaxTokens: 11}}
	for id, r := range reqs {
		ws.WriteJSON(Msg{Type: "generate", ID: id, Prompt: r.Prompt, IDs: r.IDs, MaxTokens: r.MaxTokens})
	}
	got := map[string][]int{}
	texts := map[string]string{}
	for done := 0; done < 2; {
		m := readMsg(t, ws)
		switch m.Type {
		case "token":
			got[m.ID] = append(got[m.ID], *m.TokenID)
			texts[m.ID] += m.Text
		case "done":
			done++
			want := reference(t, fm, reqs[m.ID])
			if fmt.Sprint(got[m.ID]) != fmt.Sprint(want.IDs) || texts[m.ID] != want.Text || m.Result.Text != want.Text ||
				m.Result.FinishReason != "length" || m.Result.Worker != "native-0" {
				t.Errorf("%s: %v %q %+v, want %v", m.ID, got[m.ID], texts[m.ID], m.Result, want.IDs)
			}
		default:
			t.Fatalf("unexpected %+v", m)
		}
	}
	// Unknown model and worker.
	ws.WriteJSON(Msg{Type: "generate", ID: "x", Prompt: "p", Model: "nope"})
	if m := readMsg(t, ws); m.Type != "error" || m.Error.Code != "model_not_found" {
		t.Errorf("unknown model: %+v", m)
	}
	ws.WriteJSON(Msg{Type: "generate", ID: "y", Prompt: "p", Worker: "browser-99"})
	if m := readMsg(t, ws); m.Type != "error" || m.Error.Code != "worker_not_found" {
		t.Errorf("unknown worker: %+v", m)
	}
}

func TestWSCancelAndLimits(t *testing.T) {
	fm := &fakeModel{delay: 5 * time.Millisecond}
	ts := startServer(t, Config{MaxPerConn: 2}, map[string]Model{"m": fm})
	ws, _ := dialWS(t, ts.WSURL, nil)
	defer ws.Close()
	ws.WriteJSON(Msg{Type: "generate", ID: "long", Prompt: "p", MaxTokens: 100000})
	ws.WriteJSON(Msg{Type: "generate", ID: "long", Prompt: "p", MaxTokens: 10})
	ws.WriteJSON(Msg{Type: "generate", ID: "long2", Prompt: "p", MaxTokens: 100000})
	ws.WriteJSON(Msg{Type: "generate", ID: "three", Prompt: "p", MaxTokens: 10})
	var sawDup, sawLimit bool
	for !sawDup || !sawLimit {
		m := readMsg(t, ws)
		if m.Type == "error" && m.ID == "long" && m.Error.Code == "duplicate_id" {
			sawDup = true
		}
		if m.Type == "error" && m.ID == "three" && m.Error.Code == "rate_limit_exceeded" {
			sawLimit = true
		}
	}
	ws.WriteJSON(Msg{Type: "cancel", ID: "long"})
	ws.WriteJSON(Msg{Type: "cancel", ID: "long2"})
	ws.WriteJSON(Msg{Type: "cancel", ID: "nothing"})
	ended := map[string]string{}
	for len(ended) < 3 {
		m := readMsg(t, ws)
		switch {
		case m.Type == "done":
			ended[m.ID] = m.Result.FinishReason
		case m.Type == "error" && m.ID == "nothing":
			ended[m.ID] = m.Error.Code
		}
	}
	if ended["long"] != "cancelled" || ended["long2"] != "cancelled" || ended["nothing"] != "not_found" {
		t.Errorf("after cancel: %v", ended)
	}
}

func TestWSAuth(t *testing.T) {
	ts := startServer(t, Config{Token: "tok"}, map[string]Model{"m": &fakeModel{}})
	// Wrong bearer header: refused at the handshake with 401.
	_, resp, err := websocket.DefaultDialer.Dial(ts.WSURL, http.Header{"Authorization": {"Bearer nope"}})
	if err == nil || resp == nil || resp.StatusCode != 401 {
		t.Fatalf("wrong header token: err %v resp %v, want 401", err, resp)
	}
	// Right header: authenticated at once.
	ws, hello := dialWS(t, ts.WSURL, http.Header{"Authorization": {"Bearer tok"}})
	if hello.AuthRequired {
		t.Errorf("hello asks for auth after a good header")
	}
	ws.WriteJSON(Msg{Type: "workers", ID: "1"})
	if m := readMsg(t, ws); m.Type != "workers" {
		t.Errorf("after header auth: %+v", m)
	}
	ws.Close()
	// No header: auth message.
	ws, hello = dialWS(t, ts.WSURL, nil)
	if !hello.AuthRequired {
		t.Errorf("hello does not ask for auth")
	}
	ws.WriteJSON(Msg{Type: "auth", ID: "a", Token: "tok"})
	if m := readMsg(t, ws); m.Type != "auth_ok" {
		t.Errorf("auth: %+v", m)
	}
	ws.WriteJSON(Msg{Type: "generate", ID: "g", Prompt: "x", MaxTokens: 1})
	if m := readMsg(t, ws); m.Type != "token" {
		t.Errorf("after auth: %+v", m)
	}
	ws.Close()
	// Wrong auth message, or anything before auth: error, then closed.
	for _, first := range []Msg{{Type: "auth", ID: "a", Token: "tok2"}, {Type: "generate", ID: "g", Prompt: "x"}} {
		ws, _ = dialWS(t, ts.WSURL, nil)
		ws.WriteJSON(first)
		if m := readMsg(t, ws); m.Type != "error" || m.Error.Code != "unauthorized" {
			t.Errorf("%s before auth: %+v", first.Type, m)
		}
		ws.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, _, err := ws.ReadMessage(); err == nil {
			t.Errorf("connection still open after a failed auth")
		}
		ws.Close()
	}
}

func TestWSOrigin(t *testing.T) {
	ts := startServer(t, Config{AllowOrigins: []string{"https://app.example"}}, map[string]Model{"m": &fakeModel{}})
	for origin, ok := range map[string]bool{
		"":                     true,
		"http://" + ts.Addr:    true,
		"https://app.example":  true,
		"https://evil.example": false,
		"http://127.0.0.1:1":   false,
		"null":                 false,
	} {
		h := http.Header{}
		if origin != "" {
			h.Set("Origin", origin)
		}
		ws, resp, err := websocket.DefaultDialer.Dial(ts.WSURL, h)
		if ok != (err == nil) {
			t.Errorf("origin %q: err %v, want ok=%v", origin, err, ok)
		}
		if !ok && (resp == nil || resp.StatusCode != 403) {
			t.Errorf("origin %q: resp %v, want 403", origin, resp)
		}
		if ws != nil {
			ws.Close()
		}
	}
}

func TestWSOversizeClosesOnlyThatConnection(t *testing.T) {
	fm := &fakeModel{delay: 2 * time.Millisecond}
	ts := startServer(t, Config{MaxMessageBytes: 4096}, map[string]Model{"m": fm})
	other, _ := dialWS(t, ts.WSURL, nil)
	defer other.Close()
	other.WriteJSON(Msg{Type: "generate", ID: "g", Prompt: "keep going", MaxTokens: 50})

	big, _ := dialWS(t, ts.WSURL, nil)
	defer big.Close()
	big.WriteJSON(Msg{Type: "generate", ID: "b", Prompt: strings.Repeat("x", 10000)})
	big.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		_, _, err := big.ReadMessage()
		if err != nil {
			if !websocket.IsCloseError(err, websocket.CloseMessageTooBig) {
				t.Logf("oversize connection ended with %v", err)
			}
			break
		}
	}
	var ids []int
	for {
		m := readMsg(t, other)
		if m.Type == "token" {
			ids = append(ids, *m.TokenID)
		}
		if m.Type == "done" {
			if want := reference(t, fm, GenRequest{Prompt: "keep going", MaxTokens: 50}); fmt.Sprint(ids) != fmt.Sprint(want.IDs) {
				t.Errorf("other connection's stream damaged: %v", ids)
			}
			break
		}
		if m.Type == "error" {
			t.Fatalf("other connection: %+v", m)
		}
	}
}

func TestWSGarbageFrames(t *testing.T) {
	fm := &fakeModel{}
	ts := startServer(t, Config{}, map[string]Model{"m": fm})
	ws, _ := dialWS(t, ts.WSURL, nil)
	defer ws.Close()
	garbage := []string{"", "{", "null", "[]", "42", `{"type":""}`, `{"type":7}`, `{"id":"x"}`, "\xff\xfe",
		`{"type":"generate","id":"g","max_tokens":-5,"prompt":"x"}`, `{"type":"generate","ids":"nope"}`,
		`{"type":"generate","id":"` + strings.Repeat("i", 500) + `","prompt":"x"}`, `{"type":"cancel"}`,
		`{"type":"generate","id":"t","temperature":-1,"prompt":"x"}`, `{"type":"token","id":"z","token_id":1}`,
		`{"type":"register","id":"r"}`, `{"type":"generate","id":"np"}`}
	const n = 1000
	errs := make(chan int, 1)
	go func() {
		count := 0
		ws.SetReadDeadline(time.Now().Add(20 * time.Second))
		for count < n {
			var m Msg
			if err := ws.ReadJSON(&m); err != nil {
				break
			}
			if m.Type == "error" {
				count++
			}
		}
		errs <- count
	}()
	for i := 0; i < n; i++ {
		g := garbage[i%len(garbage)]
		mt := websocket.TextMessage
		if i%7 == 3 {
			mt = websocket.BinaryMessage
		}
		if err := ws.WriteMessage(mt, []byte(g)); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
	}
	if got := <-errs; got != n {
		t.Fatalf("%d error replies to %d garbage frames", got, n)
	}
	// The connection and the server still work.
	ws.WriteJSON(Msg{Type: "generate", ID: "ok", Prompt: "p", MaxTokens: 2})
	for {
		m := readMsg(t, ws)
		if m.Type == "done" {
			break
		}
		if m.Type == "error" {
			t.Fatalf("%+v", m)
		}
	}
	resp, err := httpClient.Get(ts.URL + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	resp.Body.Close()
}

func TestWSSlowReaderDropped(t *testing.T) {
	before := runtime.NumGoroutine()
	fm := &fakeModel{}
	ts := startServer(t, Config{SendQueue: 16, WriteTimeout: 2 * time.Second}, map[string]Model{"m": fm})
	slow, _ := dialWS(t, ts.WSURL, nil)
	defer slow.Close()
	// Never read: the socket buffers fill, then the queue, then the server
	// drops the connection and cancels the generation.
	slow.WriteJSON(Msg{Type: "generate", ID: "g", Prompt: "flood", MaxTokens: 5_000_000})
	deadline := time.Now().Add(20 * time.Second)
	for ts.metrics.wsDropped.Load() == 0 || ts.active.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("slow reader not dropped: dropped=%d active=%d", ts.metrics.wsDropped.Load(), ts.active.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Others are served meanwhile.
	c, err := Dial(context.Background(), ts.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Generate(context.Background(), &Msg{Prompt: "x", MaxTokens: 3}, nil); err != nil {
		t.Fatal(err)
	}
	c.Close()
	slow.Close()
	ts.shutdown(t)
	checkGoroutines(t, before)
}

// fakeTab plays a browser tab attached as a worker: it registers and
// answers generate/load/cancel with the fake model's output.
type fakeTab struct {
	t       *testing.T
	ws      *websocket.Conn
	id      string
	m       *fakeModel
	wmu     sync.Mutex
	mu      sync.Mutex
	cancels map[string]context.CancelFunc
	seen    chan Msg // every server message, for assertions
}

func startTab(t *testing.T, ts *testServer, models []string, m *fakeModel) *fakeTab {
	ws, hello := dialWS(t, ts.WSURL+"?role=worker", nil)
	if hello.Role != "worker" {
		t.Fatalf("worker hello %+v", hello)
	}
	tab := &fakeTab{t: t, ws: ws, m: m, cancels: map[string]context.CancelFunc{}, seen: make(chan Msg, 1000)}
	tab.send(Msg{Type: "register", ID: "r1", Name: "test tab", Models: models, Backend: "webgpu-test"})
	r := readMsg(t, ws)
	if r.Type != "registered" || r.ID != "r1" || r.Worker == "" || r.Info == nil || r.Info.Kind != "browser" {
		t.Fatalf("register reply %+v", r)
	}
	tab.id = r.Worker
	go tab.loop()
	return tab
}

func (tab *fakeTab) send(m Msg) {
	tab.wmu.Lock()
	defer tab.wmu.Unlock()
	tab.ws.WriteJSON(m)
}

func (tab *fakeTab) loop() {
	defer func() {
		tab.mu.Lock()
		for _, c := range tab.cancels {
			c()
		}
		tab.mu.Unlock()
	}()
	for {
		var m Msg
		if err := tab.ws.ReadJSON(&m); err != nil {
			return
		}
		select {
		case tab.seen <- m:
		default:
		}
		switch m.Type {
		case "generate":
			ctx, cancel := context.WithCancel(context.Background())
			tab.mu.Lock()
			tab.cancels[m.ID] = cancel
			tab.mu.Unlock()
			go func(m Msg) {
				defer cancel()
				res, err := tab.m.Generate(ctx, m.genRequest(), func(tk Token) error {
					id := tk.ID
					tab.send(Msg{Type: "token", ID: m.ID, TokenID: &id, Text: tk.Text})
					return nil
				})
				if err != nil {
					tab.send(Msg{Type: "error", ID: m.ID, Error: &ErrorBody{Code: "engine", Message: err.Error()}})
					return
				}
				tab.send(Msg{Type: "done", ID: m.ID, Result: res})
			}(m)
		case "cancel":
			tab.mu.Lock()
			if c := tab.cancels[m.ID]; c != nil {
				c()
			}
			tab.mu.Unlock()
		case "load":
			go func(m Msg) {
				for _, st := range []string{"fetching", "compiling"} {
					tab.send(Msg{Type: "progress", ID: m.ID, Progress: &Progress{Stage: st, Loaded: 50, Total: 100}})
				}
				if m.Model == "broken" {
					tab.send(Msg{Type: "error", ID: m.ID, Error: &ErrorBody{Code: "load", Message: "no such model"}})
					return
				}
				tab.send(Msg{Type: "loaded", ID: m.ID, Models: []string{m.Model}, Backend: "webgpu-test"})
			}(m)
		}
	}
}

func TestBrowserWorkerRelay(t *testing.T) {
	before := runtime.NumGoroutine()
	native := &fakeModel{}
	ts := startServer(t, Config{}, map[string]Model{"native": native})
	tabModel := &fakeModel{delay: time.Millisecond}
	tab := startTab(t, ts, []string{"tabmodel"}, tabModel)

	c, err := Dial(context.Background(), ts.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	ws, err := c.Workers(context.Background())
	if err != nil || len(ws) != 2 || ws[1].ID != tab.id || ws[1].Kind != "browser" || ws[1].Models[0] != "tabmodel" || ws[1].Backend != "webgpu-test" {
		t.Fatalf("workers %+v %v", ws, err)
	}
	// By worker id and by model name, concurrently.
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := GenRequest{Prompt: fmt.Sprintf("prompt %d", i), MaxTokens: 20, Sampling: sampleSeed(uint64(i))}
			m := generateMsg("", req)
			if i%2 == 0 {
				m.Worker = tab.id
			} else {
				m.Model = "tabmodel"
			}
			var ids []int
			res, err := c.Generate(context.Background(), m, func(tk Token) error { ids = append(ids, tk.ID); return nil })
			if err != nil {
				t.Errorf("relay %d: %v", i, err)
				return
			}
			want := reference(t, tabModel, req)
			if fmt.Sprint(ids) != fmt.Sprint(want.IDs) || res.Text != want.Text || res.Worker != tab.id || res.Backend != "fake" {
				t.Errorf("relay %d: %v %+v, want %v", i, ids, res, want.IDs)
			}
		}()
	}
	wg.Wait()
	// The HTTP API reaches the tab by model name too.
	resp, data := postJSON(t, ts.URL+"/v1/completions", "", `{"model":"tabmodel","prompt":"http","max_tokens":4,"temperature":0}`)
	if want := reference(t, tabModel, GenRequest{Prompt: "http", MaxTokens: 4}); resp.StatusCode != 200 || data2text(t, data) != want.Text {
		t.Errorf("HTTP via tab: %d %s", resp.StatusCode, data)
	}

	// Cancel is relayed: the tab sees it and the client gets "cancelled".
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	res, err := c.Generate(ctx, &Msg{Worker: tab.id, Prompt: "long", MaxTokens: 100000}, func(Token) error {
		if n++; n == 5 {
			cancel()
		}
		return nil
	})
	if err != nil || res.FinishReason != "cancelled" {
		t.Errorf("cancelled relay: %+v %v", res, err)
	}
	sawCancel := false
	for len(tab.seen) > 0 {
		if m := <-tab.seen; m.Type == "cancel" {
			sawCancel = true
		}
	}
	if !sawCancel {
		t.Errorf("the tab never saw the cancel")
	}

	// Load with progress, relayed.
	var stages []string
	info, err := c.Load(context.Background(), tab.id, "other", func(p Progress) { stages = append(stages, p.Stage) })
	if err != nil || info == nil || info.Models[0] != "other" || strings.Join(stages, ",") != "fetching,compiling" {
		t.Errorf("load: %+v %v %v", info, err, stages)
	}
	if _, err := c.Load(context.Background(), tab.id, "broken", nil); err == nil {
		t.Errorf("broken load succeeded")
	}
	// Loading on the server itself is refused without a Loader.
	if _, err := c.Load(context.Background(), "", "x", nil); err == nil || !strings.Contains(err.Error(), "load_disabled") {
		t.Errorf("native load without a loader: %v", err)
	}

	// The tab disconnects mid-generation: the client gets an error, the
	// worker disappears.
	errc := make(chan error, 1)
	go func() {
		_, err := c.Generate(context.Background(), &Msg{Worker: tab.id, Prompt: "orphan", MaxTokens: 100000}, nil)
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	tab.ws.Close()
	if err := <-errc; err == nil || !strings.Contains(err.Error(), "worker_error") {
		t.Errorf("after the tab left: %v", err)
	}
	for deadline := time.Now().Add(5 * time.Second); len(ts.Workers()) != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("workers after disconnect: %+v", ts.Workers())
		}
	}
	c.Close()
	ts.shutdown(t)
	checkGoroutines(t, before)
}

func TestShutdownWithGenerationsInFlight(t *testing.T) {
	before := runtime.NumGoroutine()
	fm := &fakeModel{delay: 2 * time.Millisecond}
	ts := startServer(t, Config{}, map[string]Model{"m": fm})
	tab := startTab(t, ts, []string{"tabmodel"}, &fakeModel{delay: 2 * time.Millisecond})
	_ = tab

	const nWS, nSSE = 6, 4
	var wg sync.WaitGroup
	var mu sync.Mutex
	finals := map[string]string{}
	c, err := Dial(context.Background(), ts.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < nWS; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := &Msg{Prompt: fmt.Sprint("ws", i), MaxTokens: 1_000_000}
			if i%3 == 2 {
				m.Model = "tabmodel"
			}
			res, err := c.Generate(context.Background(), m, nil)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				finals[fmt.Sprint("ws", i)] = "error: " + err.Error()
				return
			}
			finals[fmt.Sprint("ws", i)] = res.FinishReason
		}()
	}
	for i := 0; i < nSSE; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := httpClient.Post(ts.URL+"/v1/chat/completions", "application/json",
				strings.NewReader(fmt.Sprintf(`{"messages":[{"role":"user","content":"sse%d"}],"stream":true,"temperature":0}`, i)))
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			events := sseEvents(t, resp.Body)
			finish := "none"
			for _, e := range events {
				if strings.Contains(e, `"finish_reason":"`) {
					var c chunk
					json.Unmarshal([]byte(e), &c)
					finish = *c.Choices[0].FinishReason
				}
			}
			if events[len(events)-1] != "[DONE]" {
				finish += " without [DONE]"
			}
			mu.Lock()
			finals[fmt.Sprint("sse", i)] = finish
			mu.Unlock()
		}()
	}
	for deadline := time.Now().Add(10 * time.Second); ts.active.Load() != nWS+nSSE; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("only %d generations started", ts.active.Load())
		}
	}
	time.Sleep(20 * time.Millisecond)
	ts.shutdown(t)
	wg.Wait()
	c.Close()
	if len(finals) != nWS+nSSE {
		t.Errorf("finals %v", finals)
	}
	for k, v := range finals {
		if v != "shutdown" {
			t.Errorf("%s ended with %q, want shutdown", k, v)
		}
	}
	if !fm.closed.Load() {
		t.Errorf("model not closed at shutdown")
	}
	checkGoroutines(t, before)
}

func sampleSeed(seed uint64) sample.Params {
	return sample.Params{Temperature: 0.7, TopK: 5, Seed: seed}
}

func TestSlotsQueueInOrder(t *testing.T) {
	fm := &fakeModel{delay: 5 * time.Millisecond}
	ts := startServer(t, Config{Slots: 1}, map[string]Model{"m": fm})
	c, err := Dial(context.Background(), ts.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	first := make(chan *Result, 1)
	go func() {
		res, err := c.Generate(context.Background(), &Msg{Prompt: "a", MaxTokens: 20}, nil)
		if err != nil {
			t.Error(err)
		}
		first <- res
	}()
	for deadline := time.Now().Add(5 * time.Second); fm.calls.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("first generation never started")
		}
	}
	// The second waits for the slot; cancelled while waiting, it ends
	// "cancelled" without ever reaching the model.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	res, err := c.Generate(ctx, &Msg{Prompt: "b", MaxTokens: 5}, nil)
	if err != nil || res.FinishReason != "cancelled" || fm.calls.Load() != 1 {
		t.Errorf("waiting generation cancelled: %+v %v (model calls %d)", res, err, fm.calls.Load())
	}
	if r := <-first; r.FinishReason != "length" || len(r.IDs) != 20 {
		t.Errorf("first: %+v", r)
	}
	res, err = c.Generate(context.Background(), &Msg{Prompt: "c", MaxTokens: 3}, nil)
	if err != nil || len(res.IDs) != 3 {
		t.Errorf("after the slot freed: %+v %v", res, err)
	}
}

func TestBrowserWorkersShareLoad(t *testing.T) {
	ts := startServer(t, Config{}, nil)
	tm := &fakeModel{delay: 2 * time.Millisecond}
	a := startTab(t, ts, []string{"tm"}, tm)
	b := startTab(t, ts, []string{"tm"}, tm)
	c, err := Dial(context.Background(), ts.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan string, 2)
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			first := true
			res, err := c.Generate(ctx, &Msg{Prompt: "x", MaxTokens: 100000}, func(Token) error {
				if first {
					first = false
					started <- ""
				}
				return nil
			})
			if err != nil || res.FinishReason != "cancelled" {
				t.Errorf("%+v %v", res, err)
			}
			started <- res.Worker
		}()
		<-started
	}
	cancel()
	wg.Wait()
	w1, w2 := <-started, <-started
	if w1 == w2 || (w1 != a.id && w1 != b.id) || (w2 != a.id && w2 != b.id) {
		t.Errorf("two generations ran on %q and %q, want one on each of %q %q", w1, w2, a.id, b.id)
	}
}
