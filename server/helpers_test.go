package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/cortiq/cortiq/fixtures"
)

// fakeModel generates a deterministic sequence from the prompt: token k is
// a hash of the prompt and k (and the seed, when sampling), its text
// "t<id> ". It honours MaxTokens (default 24), Stop, the context and
// onToken's errors, like the engine.
type fakeModel struct {
	delay   time.Duration // per token
	eosAt   int           // finish with "eos" after this many tokens (0 = never)
	calls   atomic.Int64
	closed  atomic.Bool
	started chan struct{} // if set, receives once per generation start
}

func promptIDs(req GenRequest) []int {
	if req.IDs != nil {
		return req.IDs
	}
	s := req.Prompt
	for _, m := range req.Messages {
		s += "<|" + m.Role + "|>" + m.Content
	}
	ids := make([]int, 0, len(s))
	for _, b := range []byte(s) {
		ids = append(ids, int(b))
	}
	return ids
}

func fakeToken(prompt []int, k int, seed uint64, sampled bool) int {
	h := uint64(1469598103934665603)
	for _, id := range prompt {
		h = (h ^ uint64(id)) * 1099511628211
	}
	h = (h ^ uint64(k)) * 1099511628211
	if sampled {
		h = (h ^ seed) * 1099511628211
	}
	return int(h % 1000)
}

func (f *fakeModel) BackendName() string { return "fake" }
func (f *fakeModel) Close() error        { f.closed.Store(true); return nil }

func (f *fakeModel) Generate(ctx context.Context, req GenRequest, onToken func(Token) error) (*Result, error) {
	f.calls.Add(1)
	if f.started != nil {
		select {
		case f.started <- struct{}{}:
		default:
		}
	}
	prompt := promptIDs(req)
	if len(prompt) == 0 {
		return nil, errors.New("fake: empty prompt")
	}
	n := req.MaxTokens
	if n <= 0 {
		n = 24
	}
	res := &Result{PromptTokens: len(prompt), FinishReason: "length", Backend: "fake"}
	var text strings.Builder
	for k := 0; k < n; k++ {
		if ctx.Err() != nil {
			res.FinishReason = "cancelled"
			break
		}
		if f.delay > 0 {
			select {
			case <-time.After(f.delay):
			case <-ctx.Done():
			}
			if ctx.Err() != nil {
				res.FinishReason = "cancelled"
				break
			}
		}
		id := fakeToken(prompt, k, req.Sampling.Seed, !req.Sampling.Greedy())
		piece := fmt.Sprintf("t%d ", id)
		stopped := false
		for _, s := range req.Stop {
			if s != "" && strings.Contains(text.String()+piece, s) {
				i := strings.Index(text.String()+piece, s)
				piece = (text.String() + piece)[text.Len():i]
				stopped = true
				break
			}
		}
		res.IDs = append(res.IDs, id)
		text.WriteString(piece)
		if err := onToken(Token{ID: id, Text: piece}); err != nil {
			return nil, err
		}
		if stopped {
			res.FinishReason = "stop"
			break
		}
		if f.eosAt > 0 && k+1 == f.eosAt {
			res.FinishReason = "eos"
			break
		}
	}
	res.Text = text.String()
	return res, nil
}

// reference runs m directly, as the server's reference output.
func reference(t testing.TB, m Model, req GenRequest) *Result {
	t.Helper()
	res, err := m.Generate(context.Background(), req, func(Token) error { return nil })
	if err != nil {
		t.Fatalf("reference generate: %v", err)
	}
	return res
}

type testServer struct {
	*Server
	URL   string // http://127.0.0.1:port
	WSURL string
	Addr  string
	errc  chan error
}

// startServer serves s on a loopback port; cleanup shuts it down.
func startServer(t testing.TB, cfg Config, models map[string]Model) *testServer {
	t.Helper()
	if cfg.Logf == nil {
		cfg.Logf = func(format string, args ...any) { t.Logf(format, args...) }
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Deterministic order: the keys sorted.
	names := make([]string, 0, len(models))
	for n := range models {
		names = append(names, n)
	}
	sortStrings(names)
	for _, n := range names {
		s.AddModel(n, "", models[n])
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{Server: s, Addr: l.Addr().String(), errc: make(chan error, 1)}
	ts.URL = "http://" + ts.Addr
	ts.WSURL = "ws://" + ts.Addr + "/v1/ws"
	go func() { ts.errc <- s.Serve(l) }()
	t.Cleanup(func() { ts.shutdown(t) })
	return ts
}

func (ts *testServer) shutdown(t testing.TB) {
	if ts.draining.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ts.Shutdown(ctx); err != nil {
		t.Errorf("shutdown: %v", err)
	}
	select {
	case err := <-ts.errc:
		if !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve returned %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("Serve did not return after Shutdown")
	}
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

var httpClient = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

func postJSON(t testing.TB, url, token string, body any) (*http.Response, []byte) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest("POST", url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("POST %s: reading: %v", url, err)
	}
	return resp, data
}

// sseEvents parses a server-sent event stream into its data payloads.
func sseEvents(t testing.TB, r io.Reader) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		if !strings.HasPrefix(line, "data: ") {
			t.Fatalf("SSE line without data: prefix: %q", line)
		}
		out = append(out, strings.TrimPrefix(line, "data: "))
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("SSE read: %v", err)
	}
	return out
}

// dialWS connects a raw websocket and reads the hello.
func dialWS(t testing.TB, url string, h http.Header) (*websocket.Conn, Msg) {
	t.Helper()
	ws, resp, err := websocket.DefaultDialer.Dial(url, h)
	if err != nil {
		status := ""
		if resp != nil {
			status = resp.Status
		}
		t.Fatalf("dial %s: %v %s", url, err, status)
	}
	var hello Msg
	ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	if err := ws.ReadJSON(&hello); err != nil {
		t.Fatalf("reading hello: %v", err)
	}
	ws.SetReadDeadline(time.Time{})
	if hello.Type != "hello" {
		t.Fatalf("first message %+v, want hello", hello)
	}
	return ws, hello
}

func readMsg(t testing.TB, ws *websocket.Conn) Msg {
	t.Helper()
	var m Msg
	ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	if err := ws.ReadJSON(&m); err != nil {
		t.Fatalf("reading message: %v", err)
	}
	return m
}

// checkGoroutines fails when goroutines started since before stay alive.
func checkGoroutines(t testing.TB, before int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	n := 0
	for time.Now().Before(deadline) {
		httpClient.CloseIdleConnections()
		n = runtime.NumGoroutine()
		if n <= before {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	t.Errorf("goroutine leak: %d before, %d after\n%s", before, n, buf)
}

// percentile of sorted durations.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(p * float64(len(d)-1))
	return d[i]
}

// sseReader reads data payloads one at a time, as they arrive.
type sseReader struct{ sc *bufio.Scanner }

func newSSEReader(r io.Reader) *sseReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	return &sseReader{sc}
}

func (r *sseReader) next() (string, error) {
	for r.sc.Scan() {
		line := r.sc.Text()
		if line == "" {
			continue
		}
		if !strings.HasPrefix(line, "data: ") {
			return "", fmt.Errorf("SSE line without data: prefix: %q", line)
		}
		return strings.TrimPrefix(line, "data: "), nil
	}
	if err := r.sc.Err(); err != nil {
		return "", err
	}
	return "", io.ErrUnexpectedEOF
}

func jsonUnmarshal(t testing.TB, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("decoding %s: %v", data, err)
	}
}

func TestMain(m *testing.M) {
	code := fixtures.RunHermetic(m)
	if npmDir != "" {
		os.RemoveAll(npmDir)
	}
	os.Exit(code)
}
