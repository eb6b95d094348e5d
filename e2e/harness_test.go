package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/cortiq/cortiq/e2e/wasmtest"
	"github.com/cortiq/cortiq/fixtures"
	"github.com/cortiq/cortiq/server"
)

// Shared by every test: the built web bundle (or why there is none).
var (
	bundleDir string
	skipAll   string
	repoRoot  string
	sharedDir string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	flag.Parse()
	_, file, _, _ := runtime.Caller(0)
	repoRoot = filepath.Dir(filepath.Dir(file))
	sharedDir = filepath.Join(repoRoot, "..", "shared")
	switch {
	case testing.Short():
		skipAll = "e2e: browser tests skipped in -short mode"
	case chromium() == "":
		skipAll = "e2e: no Chromium at /usr/bin/chromium (apt-get install -y chromium, or set CHROMIUM): browser tests skipped"
	}
	code := fixtures.RunHermetic(m)
	if bundleDir != "" {
		os.RemoveAll(bundleDir)
	}
	return code
}

var (
	bundleOnce sync.Once
	bundleErr  error
)

// bundle builds the web bundle once per test binary, on first need.
func bundle(t *testing.T) string {
	t.Helper()
	bundleOnce.Do(func() {
		dir, err := os.MkdirTemp("", "cortiq-e2e-web-")
		if err != nil {
			bundleErr = err
			return
		}
		t0 := time.Now()
		if err := buildBundle(dir); err != nil {
			bundleErr = fmt.Errorf("e2e: building the web bundle: %w", err)
			os.RemoveAll(dir)
			return
		}
		fmt.Fprintf(os.Stderr, "e2e: web bundle built in %.1fs\n", time.Since(t0).Seconds())
		bundleDir = dir
	})
	if bundleErr != nil {
		t.Fatal(bundleErr)
	}
	return bundleDir
}

func chromium() string {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	return ""
}

// buildBundle does what `make wasm` does, into dir: cortiq.wasm, Go's
// wasm_exec.js and the page sources of web/.
func buildBundle(dir string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", filepath.Join(dir, "cortiq.wasm"), "./cmd/wasm")
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%w\n%s", err, out)
	}
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return err
	}
	wasmExec := filepath.Join(strings.TrimSpace(string(goroot)), "lib", "wasm", "wasm_exec.js")
	if _, err := os.Stat(wasmExec); err != nil {
		wasmExec = filepath.Join(strings.TrimSpace(string(goroot)), "misc", "wasm", "wasm_exec.js")
	}
	if err := copyFile(wasmExec, filepath.Join(dir, "wasm_exec.js")); err != nil {
		return err
	}
	ents, err := os.ReadDir(filepath.Join(repoRoot, "web"))
	if err != nil {
		return err
	}
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || n == "cortiq.wasm" || n == "wasm_exec.js" || strings.HasPrefix(n, ".") {
			continue
		}
		if err := copyFile(filepath.Join(repoRoot, "web", n), filepath.Join(dir, n)); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

func needBrowser(t *testing.T) {
	t.Helper()
	if skipAll != "" {
		if os.Getenv(wasmtest.RequireEnv) == "1" && !testing.Short() {
			t.Fatalf("%s (%s=1: browser tests must run)", skipAll, wasmtest.RequireEnv)
		}
		t.Skip(skipAll)
	}
	bundle(t)
}

func needShared(t *testing.T, rel string) string {
	t.Helper()
	p := filepath.Join(sharedDir, rel)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("e2e: %s is absent (../shared fixtures): %v", p, err)
	}
	return p
}

// access is one request the test server saw.
type access struct {
	Method, Path, Range string
	Status              int
	Bytes               int64
}

// hostile makes the test server misbehave for one model.
type hostile int

const (
	honest      hostile = iota
	wrongLength         // sends more bytes than the listing says
	corruptByte         // right length, one byte flipped (listing has the sha256)
	wrongETag           // a sha256 ETag that is not the file's
)

// testServer serves the web bundle and models on a fixed loopback port,
// logs every request, can throttle model bytes, be killed and restarted on
// the same port (same origin, so the browser's OPFS survives), and serve
// chosen models in hostile ways. Models added with addModel go through the
// server package's handler (what `cortiq serve` runs); models added with
// addOwn are served by this file's handler, whose listing carries sha256.
type testServer struct {
	t    *testing.T
	addr string

	mu       sync.Mutex
	log      []access
	throttle int64 // bytes per second for /models/ responses; 0 = full speed
	own      map[string]string
	mode     map[string]hostile
	srv      *http.Server
	inner    http.Handler
	running  bool
}

type stubModel struct{}

func (stubModel) Generate(context.Context, server.GenRequest, func(server.Token) error) (*server.Result, error) {
	return nil, errors.New("e2e: the test server does not generate")
}
func (stubModel) BackendName() string { return "none" }
func (stubModel) Close() error        { return nil }

// newServer starts a server; models maps names to files or directories
// served through the server package.
func newServer(t *testing.T, models map[string]string) *testServer {
	t.Helper()
	srv, err := server.New(server.Config{WebDir: bundleDir, Logf: func(string, ...any) {}})
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	for name, p := range models {
		srv.AddModel(name, p, stubModel{})
	}
	s := &testServer{t: t, own: map[string]string{}, mode: map[string]hostile{}, inner: srv.Handler()}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *testServer) url() string { return "http://" + s.addr }

func (s *testServer) start() {
	s.t.Helper()
	addr := s.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	var ln net.Listener
	var err error
	for i := 0; i < 50; i++ { // the old socket may linger a moment
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		s.t.Fatalf("listen %s: %v", addr, err)
	}
	s.addr = ln.Addr().String()
	hs := &http.Server{Handler: s}
	s.mu.Lock()
	s.srv, s.running = hs, true
	s.mu.Unlock()
	go hs.Serve(ln)
}

// stop kills the server: the listener and every open connection close at
// once, as when the process dies.
func (s *testServer) stop() {
	s.mu.Lock()
	hs := s.srv
	s.running = false
	s.mu.Unlock()
	if hs != nil {
		hs.Close()
	}
}

func (s *testServer) setThrottle(bps int64) {
	s.mu.Lock()
	s.throttle = bps
	s.mu.Unlock()
}

func (s *testServer) addOwn(name, path string, mode hostile) {
	s.mu.Lock()
	s.own[name] = path
	s.mode[name] = mode
	s.mu.Unlock()
}

func (s *testServer) setMode(name string, mode hostile) {
	s.mu.Lock()
	s.mode[name] = mode
	s.mu.Unlock()
}

func (s *testServer) clearLog() {
	s.mu.Lock()
	s.log = nil
	s.mu.Unlock()
}

func (s *testServer) accesses(prefix string) []access {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []access
	for _, a := range s.log {
		if strings.HasPrefix(a.Path, prefix) {
			out = append(out, a)
		}
	}
	return out
}

func (s *testServer) bytesSent(prefix string) int64 {
	var n int64
	for _, a := range s.accesses(prefix) {
		n += a.Bytes
	}
	return n
}

func (s *testServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rw := &loggedWriter{ResponseWriter: w, status: 200}
	if strings.HasPrefix(r.URL.Path, "/models/") {
		s.mu.Lock()
		rw.throttle = s.throttle
		s.mu.Unlock()
	}
	// The access is logged when the request starts, so a kill mid-transfer
	// still leaves it in the log, and updated with the bytes at the end.
	s.mu.Lock()
	idx := len(s.log)
	s.log = append(s.log, access{Method: r.Method, Path: r.URL.Path, Range: r.Header.Get("Range")})
	s.mu.Unlock()
	rw.onWrite = func(n int64) {
		s.mu.Lock()
		if idx < len(s.log) {
			s.log[idx].Bytes += n
		}
		s.mu.Unlock()
	}
	defer func() {
		s.mu.Lock()
		if idx < len(s.log) {
			s.log[idx].Status = rw.status
		}
		s.mu.Unlock()
	}()
	if name, file, ok := s.ownModel(r.URL.Path); ok {
		s.serveOwn(rw, r, name, file)
		return
	}
	s.inner.ServeHTTP(rw, r)
}

func (s *testServer) ownModel(p string) (name, file string, ok bool) {
	rest, found := strings.CutPrefix(p, "/models/")
	if !found {
		return "", "", false
	}
	name, file, _ = strings.Cut(rest, "/")
	s.mu.Lock()
	_, ok = s.own[name]
	s.mu.Unlock()
	return name, file, ok
}

func fileSHA(t testing.TB, p string) (string, int64) {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:]), int64(len(b))
}

// serveOwn serves a single-file model with a listing that carries its size
// and sha256, honestly or as s.mode says.
func (s *testServer) serveOwn(w http.ResponseWriter, r *http.Request, name, file string) {
	s.mu.Lock()
	p, mode := s.own[name], s.mode[name]
	s.mu.Unlock()
	b, err := os.ReadFile(p)
	if err != nil {
		http.Error(w, err.Error(), 500)
		return
	}
	sum := sha256.Sum256(b)
	digest := hex.EncodeToString(sum[:])
	base := filepath.Base(p)
	if file == "" {
		entry := map[string]any{"name": base, "size": len(b)}
		if mode != wrongETag {
			entry["sha256"] = digest
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"files": []any{entry}})
		return
	}
	if file != base {
		http.NotFound(w, r)
		return
	}
	etag := `"` + digest + `"`
	switch mode {
	case wrongLength:
		b = append(b, make([]byte, 4096)...)
		etag = `"len-` + digest[:16] + `"`
	case corruptByte:
		b = append([]byte(nil), b...)
		b[len(b)/2] ^= 0x55
		etag = `"corrupt-` + digest[:16] + `"`
	case wrongETag:
		bad := sha256.Sum256([]byte("not the file"))
		etag = `"` + hex.EncodeToString(bad[:]) + `"`
	}
	w.Header().Set("ETag", etag)
	http.ServeContent(w, r, base, time.Unix(1700000000, 0), strings.NewReader(string(b)))
}

// loggedWriter counts and optionally throttles a response body.
type loggedWriter struct {
	http.ResponseWriter
	status   int
	throttle int64
	onWrite  func(int64)
}

func (w *loggedWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *loggedWriter) Write(p []byte) (int, error) {
	if w.throttle <= 0 {
		n, err := w.ResponseWriter.Write(p)
		w.onWrite(int64(n))
		return n, err
	}
	const chunk = 16 << 10
	done := 0
	for done < len(p) {
		end := min(done+chunk, len(p))
		n, err := w.ResponseWriter.Write(p[done:end])
		done += n
		w.onWrite(int64(n))
		if err != nil {
			return done, err
		}
		if f, ok := w.ResponseWriter.(http.Flusher); ok {
			f.Flush()
		}
		time.Sleep(time.Duration(float64(n) / float64(w.throttle) * float64(time.Second)))
	}
	return done, nil
}

func (w *loggedWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// browser is one headless Chromium with a fresh profile.
type browser struct {
	t      *testing.T
	ctx    context.Context
	cancel func()
	logs   []string
	mu     sync.Mutex
}

// newBrowser starts Chromium; webgpu adds --enable-unsafe-webgpu, which
// exposes the SwiftShader adapter (without it navigator.gpu gives none).
func newBrowser(t *testing.T, webgpu bool, profile string) *browser {
	t.Helper()
	if profile == "" {
		profile = t.TempDir()
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium()),
		chromedp.UserDataDir(profile),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-background-timer-throttling", true),
		chromedp.Flag("disable-renderer-backgrounding", true),
		chromedp.WindowSize(1100, 900),
	}
	if webgpu {
		opts = append(opts, chromedp.Flag("enable-unsafe-webgpu", true))
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelB := chromedp.NewContext(actx)
	b := &browser{t: t, ctx: ctx, cancel: func() { cancelB(); cancelA() }}
	lerr := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*cdpruntime.EventConsoleAPICalled); ok {
			var parts []string
			for _, a := range e.Args {
				parts = append(parts, strings.Trim(string(a.Value), `"`))
			}
			b.mu.Lock()
			b.logs = append(b.logs, strings.Join(parts, " "))
			b.mu.Unlock()
		}
	})
	if lerr != nil {
		b.cancel()
		t.Fatalf("starting chromium: %v", lerr)
	}
	t.Cleanup(b.cancel)
	return b
}

// open navigates to the page and waits for the engine.
func (b *browser) open(u string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 90*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(u)); err != nil {
		b.t.Fatalf("navigate %s: %v", u, err)
	}
	var ready map[string]any
	if err := b.evalCtx(ctx, `cortiq.ready`, &ready); err != nil {
		b.t.Fatalf("engine not ready: %v\n%s", err, b.consoleTail())
	}
}

func (b *browser) reload() {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 90*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Reload()); err != nil {
		b.t.Fatalf("reload: %v", err)
	}
	var ready map[string]any
	if err := b.evalCtx(ctx, `cortiq.ready`, &ready); err != nil {
		b.t.Fatalf("engine not ready after reload: %v", err)
	}
}

func (b *browser) evalCtx(ctx context.Context, expr string, out any) error {
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[json.RawMessage](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		return err
	}
	if out == nil || len(raw) == 0 {
		return nil
	}
	return json.Unmarshal(raw, out)
}

// eval runs expr (awaiting a promise) and decodes its JSON value into out.
func (b *browser) eval(expr string, out any, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	return b.evalCtx(ctx, expr, out)
}

func (b *browser) mustEval(expr string, out any, timeout time.Duration) {
	b.t.Helper()
	if err := b.eval(expr, out, timeout); err != nil {
		b.t.Fatalf("%s: %v\nconsole:\n%s", short(expr), err, b.consoleTail())
	}
}

func (b *browser) consoleTail() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	l := b.logs
	if len(l) > 30 {
		l = l[len(l)-30:]
	}
	return strings.Join(l, "\n")
}

func (b *browser) screenshot(name string) string {
	b.t.Helper()
	buf, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatalf("screenshot: %v", err)
	}
	dir := os.Getenv("CORTIQ_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(repoRoot, "e2e", "artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, buf, 0o644); err != nil {
		b.t.Fatal(err)
	}
	return p
}

func short(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 160 {
		return s[:160] + "…"
	}
	return s
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// loadInfo is the part of cortiq.load's result the tests check.
type loadInfo struct {
	Backend     string  `json:"backend"`
	DeviceError string  `json:"deviceError"`
	FromCache   bool    `json:"fromCache"`
	Downloaded  int64   `json:"downloadedBytes"`
	Resumed     int64   `json:"resumedBytes"`
	Family      string  `json:"family"`
	Vocab       int     `json:"vocab"`
	LoadSeconds float64 `json:"loadSeconds"`
	FetchSec    float64 `json:"fetchSeconds"`
	ImportSec   float64 `json:"importSeconds"`
	BackendSec  float64 `json:"backendSeconds"`
	Files       []struct {
		Name     string `json:"name"`
		Size     int64  `json:"size"`
		SHA256   string `json:"sha256"`
		Verified string `json:"verified"`
	} `json:"files"`
	Heap struct {
		Baseline   float64 `json:"baselineHeapBytes"`
		Peak       float64 `json:"peakHeapBytes"`
		PeakAbove  float64 `json:"peakAboveBaseline"`
		PeakSys    float64 `json:"peakSysBytes"`
		WasmMemory float64 `json:"wasmMemoryBytes"`
		WasmBefore float64 `json:"wasmMemoryBefore"`
		Final      float64 `json:"finalHeapBytes"`
		Before     float64 `json:"beforeWeightsBytes"`
		Samples    int     `json:"samples"`
	} `json:"heap"`
}

type genResult struct {
	Text         string  `json:"text"`
	IDs          []int   `json:"ids"`
	PromptIDs    []int   `json:"promptIds"`
	Backend      string  `json:"backend"`
	PrefillTokS  float64 `json:"prefillTokS"`
	CachedTokens int     `json:"cachedTokens"`
	DecodeTokS   float64 `json:"decodeTokS"`
	FinishReason string  `json:"finishReason"`
	DeviceError  string  `json:"deviceError"`
}

// load calls cortiq.load and returns its result, or the error message
// and kind.
func (b *browser) load(source string, opts string, timeout time.Duration) (*loadInfo, error) {
	if opts == "" {
		opts = "{}"
	}
	var res struct {
		Info  *loadInfo `json:"info"`
		Error string    `json:"error"`
		Kind  string    `json:"kind"`
	}
	expr := fmt.Sprintf(`cortiq.load(%s, %s).then(info => ({info}), e => ({error: e.message, kind: e.kind}))`, jsString(source), opts)
	if err := b.eval(expr, &res, timeout); err != nil {
		b.t.Fatalf("load %s: %v\n%s", source, err, b.consoleTail())
	}
	if res.Error != "" {
		return nil, &loadError{msg: res.Error, kind: res.Kind}
	}
	return res.Info, nil
}

type loadError struct{ msg, kind string }

func (e *loadError) Error() string { return e.kind + ": " + e.msg }

func (b *browser) mustLoad(source, opts string, timeout time.Duration) *loadInfo {
	b.t.Helper()
	info, err := b.load(source, opts, timeout)
	if err != nil {
		b.t.Fatalf("load %s: %v\nconsole:\n%s", source, err, b.consoleTail())
	}
	return info
}

func (b *browser) generate(req map[string]any, timeout time.Duration) *genResult {
	b.t.Helper()
	j, _ := json.Marshal(req)
	var res genResult
	b.mustEval(fmt.Sprintf(`cortiq.generate(%s)`, j), &res, timeout)
	return &res
}

// bodyBytes reads a response's body (closing it).
func bodyBytes(r *http.Response) []byte {
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return b
}
