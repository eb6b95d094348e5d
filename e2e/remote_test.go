package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cortiq/cortiq/server"
)

var (
	cliOnce sync.Once
	cliPath string
	cliErr  error
)

// cli builds the native binary (cmd/native) once per test binary. It
// lives at one fixed temporary path, replaced atomically by each build, so
// runs do not pile up copies of it.
func cli(t *testing.T) string {
	t.Helper()
	cliOnce.Do(func() {
		dir := filepath.Join(os.TempDir(), "cortiq-e2e-cli")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			cliErr = err
			return
		}
		p := filepath.Join(dir, "cortiq")
		tmp := fmt.Sprintf("%s.%d", p, os.Getpid())
		cmd := exec.Command("go", "build", "-o", tmp, "./cmd/native")
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			os.Remove(tmp)
			cliErr = fmt.Errorf("e2e: building cmd/native: %w\n%s", err, out)
			return
		}
		if err := os.Rename(tmp, p); err != nil {
			cliErr = err
			return
		}
		cliPath = p
	})
	if cliErr != nil {
		t.Fatal(cliErr)
	}
	return cliPath
}

// cliLine is one JSON line of `cortiq run --json` / `cortiq remote run
// --json`: a token ({id, text}) or the final summary ({done: true, ...}).
type cliLine struct {
	ID           int     `json:"id"`
	Text         string  `json:"text"`
	Done         bool    `json:"done"`
	IDs          []int   `json:"ids"`
	Backend      string  `json:"backend"`
	FinishReason string  `json:"finish_reason"`
	Worker       string  `json:"worker"`
	TTFTMs       float64 `json:"ttft_ms"`
	TotalMs      float64 `json:"total_ms"`
	DecodeTokS   float64 `json:"decode_tok_s"`
}

// arrival is a line of output and when the test read it.
type arrival struct {
	line cliLine
	at   time.Time
}

// runCLI runs the binary and returns its stdout lines, each stamped with
// the time it was read, as they come (so streaming shows in the stamps).
func runCLI(t *testing.T, ctx context.Context, bin string, args ...string) []arrival {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("cortiq %s: %v", strings.Join(args, " "), err)
	}
	var lines []arrival
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		at := time.Now()
		var l cliLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Errorf("cortiq %s: line %q is not JSON: %v", args[0], sc.Text(), err)
			continue
		}
		lines = append(lines, arrival{l, at})
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("cortiq %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return lines
}

// cliServer is a `cortiq serve` process on a loopback port; restart
// brings it back on the same port (same origin for the tab).
type cliServer struct {
	t    *testing.T
	args []string
	addr string
	mu   sync.Mutex
	logs bytes.Buffer
	cmd  *exec.Cmd
	exit chan error
}

// serveCLI starts `cortiq serve` on a free loopback port with the bundle
// and the model, once /healthz answers.
func serveCLI(t *testing.T, bin, web, model string, extra ...string) *cliServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &cliServer{t: t, addr: ln.Addr().String()}
	ln.Close()
	s.args = append([]string{bin, "serve", "--addr", s.addr, "--web", web, "-m", model}, extra...)
	s.start()
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			s.mu.Lock()
			t.Logf("cortiq serve output:\n%s", s.logs.String())
			s.mu.Unlock()
		}
	})
	return s
}

func (s *cliServer) url() string { return "http://" + s.addr }

func (s *cliServer) start() {
	s.t.Helper()
	cmd := exec.Command(s.args[0], s.args[1:]...)
	cmd.Stdout = lockedWriter{&s.mu, &s.logs}
	cmd.Stderr = lockedWriter{&s.mu, &s.logs}
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("cortiq serve: %v", err)
	}
	exit := make(chan error, 1)
	go func() { exit <- cmd.Wait() }()
	s.cmd, s.exit = cmd, exit
	deadline := time.Now().Add(20 * time.Second)
	for {
		if r, err := http.Get(s.url() + "/healthz"); err == nil {
			r.Body.Close()
			if r.StatusCode == 200 {
				return
			}
		}
		select {
		case err := <-exit:
			s.cmd = nil
			s.mu.Lock()
			defer s.mu.Unlock()
			s.t.Fatalf("cortiq serve exited: %v\n%s", err, s.logs.String())
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("cortiq serve: %s/healthz did not answer in 20 s", s.url())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop ends the process (SIGINT, then SIGKILL after 5 s).
func (s *cliServer) stop() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.exit:
	case <-time.After(5 * time.Second):
		s.cmd.Process.Kill()
		<-s.exit
	}
	s.cmd = nil
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// TestRemoteWorker: a headless Chromium tab opened on /?worker=1 attaches
// to `cortiq serve` as a browser worker, `cortiq remote --worker <tab>
// run` drives it, and the greedy tokens it streams back equal the native
// `cortiq run`'s, token by token. Then: a cancelled generation ends at
// once and leaves the tab usable, a load job reloads the model, and after
// the server restarts the tab attaches again by itself. The tab runs the
// CPU engine (no --enable-unsafe-webgpu), which keeps the test fast.
func TestRemoteWorker(t *testing.T) {
	needBrowser(t)
	gguf := needShared(t, "fixtures/models/stories260K.gguf")
	bin := cli(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	native := runCLI(t, ctx, bin, "run", "-m", gguf, "-p", storiesPrompt, "-n", "64", "--temp", "0", "--json")
	var nativeIDs []int
	for _, a := range native {
		if !a.line.Done {
			nativeIDs = append(nativeIDs, a.line.ID)
		}
	}
	if len(nativeIDs) != 64 {
		t.Fatalf("native run: %d tokens, want 64", len(nativeIDs))
	}

	srv := serveCLI(t, bin, bundle(t), gguf)
	b := newBrowser(t, false, "")
	b.open(srv.url() + "/?worker=1&name=e2e-tab&model=stories260K")
	tab := waitWorker(t, ctx, bin, srv.url(), b, 45*time.Second)
	remoteGreedy(t, ctx, bin, srv.url(), tab, nativeIDs)
	t.Logf("screenshot %s", b.screenshot("cortiq-remote-worker.png"))

	t.Run("cancel", func(t *testing.T) {
		c, err := server.Dial(ctx, srv.url(), "")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// Sampled and past EOS to the end of the context: seconds of work
		// unless the cancel reaches the engine.
		gctx, stop := context.WithCancel(ctx)
		defer stop()
		n := 0
		t0 := time.Now()
		var cancelledAt time.Time
		res, err := c.Generate(gctx, &server.Msg{Worker: tab, Prompt: storiesPrompt, IgnoreEOS: true, Temperature: 0.8, Seed: 7},
			func(server.Token) error {
				if n++; n == 5 {
					cancelledAt = time.Now()
					stop()
				}
				return nil
			})
		if err != nil {
			t.Fatalf("cancelled generate: %v", err)
		}
		t.Logf("cancelled at the 5th token, %d tokens in all: done %v after the cancel (%v in all), finish %q", n, time.Since(cancelledAt).Round(time.Millisecond), time.Since(t0).Round(time.Millisecond), res.FinishReason)
		if res.FinishReason != "cancelled" {
			t.Errorf("finish_reason %q, want cancelled", res.FinishReason)
		}
		if d := time.Since(cancelledAt); d > 3*time.Second {
			t.Errorf("the generation ended %v after the cancel", d)
		}
		// The tab is free again.
		res, err = c.Generate(ctx, &server.Msg{Worker: tab, Prompt: storiesPrompt, MaxTokens: 8}, nil)
		if err != nil {
			t.Fatalf("generate after cancel: %v", err)
		}
		if !equalInts(res.IDs, nativeIDs[:8]) {
			t.Errorf("after cancel: ids %v, want %v", res.IDs, nativeIDs[:8])
		}
	})

	t.Run("load", func(t *testing.T) {
		c, err := server.Dial(ctx, srv.url(), "")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		progress := 0
		info, err := c.Load(ctx, tab, "stories260K", func(server.Progress) { progress++ })
		if err != nil {
			t.Fatalf("load job: %v", err)
		}
		if info.ID != tab || !slices.Contains(info.Models, "stories260K") {
			t.Errorf("loaded: %+v", info)
		}
		res, err := c.Generate(ctx, &server.Msg{Worker: tab, Prompt: storiesPrompt, MaxTokens: 8}, nil)
		if err != nil {
			t.Fatalf("generate after load: %v", err)
		}
		if !equalInts(res.IDs, nativeIDs[:8]) {
			t.Errorf("after load: ids %v, want %v", res.IDs, nativeIDs[:8])
		}
	})

	t.Run("reconnect", func(t *testing.T) {
		srv.stop()
		srv.start()
		tab := waitWorker(t, ctx, bin, srv.url(), b, 30*time.Second)
		var connects int
		b.mustEval(`window.cortiqRemote.connects`, &connects, 5*time.Second)
		t.Logf("attached again as %s after %d connection attempts in all", tab, connects)
		remoteGreedy(t, ctx, bin, srv.url(), tab, nativeIDs)
	})
}

const storiesPrompt = "Once upon a time"

// waitWorker polls `cortiq remote workers` until the tab is listed as a
// browser worker serving stories260K, checks that the page says so too,
// and returns its id.
func waitWorker(t *testing.T, ctx context.Context, bin, srv string, b *browser, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		out, err := exec.CommandContext(ctx, bin, "remote", "--server", srv, "workers").CombinedOutput()
		if err != nil {
			t.Fatalf("cortiq remote workers: %v\n%s", err, out)
		}
		tab := ""
		for _, l := range strings.Split(string(out), "\n") {
			f := strings.Fields(l)
			if len(f) >= 6 && f[1] == "browser" && f[2] == "[stories260K]" && f[len(f)-1] == "e2e-tab" {
				tab = f[0]
			}
		}
		if tab != "" {
			t.Logf("worker list:\n%s", out)
			var st struct {
				Status  string `json:"status"`
				Worker  string `json:"worker"`
				Backend string `json:"backend"`
			}
			b.mustEval(`window.cortiqRemote`, &st, 5*time.Second)
			if st.Status != "attached" || st.Worker != tab || st.Backend != "cpu" {
				t.Errorf("page state %+v, want attached as %s on cpu", st, tab)
			}
			var badge string
			b.mustEval(`document.getElementById("remote").textContent`, &badge, 5*time.Second)
			if !strings.Contains(badge, "attached as worker "+tab) {
				t.Errorf("the page shows %q, want it to say it is attached as worker %s", badge, tab)
			}
			return tab
		}
		if time.Now().After(deadline) {
			var st map[string]any
			b.eval(`window.cortiqRemote`, &st, 5*time.Second)
			t.Fatalf("the tab did not attach with stories260K in %v; last list:\n%s\npage state: %v\nconsole:\n%s", timeout, out, st, b.consoleTail())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// remoteGreedy runs `cortiq remote --worker tab run ... --json` and checks
// that the tab's tokens equal the native ones, streamed as they come.
func remoteGreedy(t *testing.T, ctx context.Context, bin, srv, tab string, nativeIDs []int) {
	t.Helper()
	start := time.Now()
	remote := runCLI(t, ctx, bin, "remote", "--server", srv, "--worker", tab, "run", "-p", storiesPrompt, "-n", "64", "--temp", "0", "--json")
	if len(remote) < 2 || !remote[len(remote)-1].line.Done {
		t.Fatalf("remote run: no tokens and final summary line in %d lines", len(remote))
	}
	final := remote[len(remote)-1]
	toks := remote[:len(remote)-1]
	var ids []int
	var text strings.Builder
	for _, a := range toks {
		ids = append(ids, a.line.ID)
		text.WriteString(a.line.Text)
	}
	if !equalInts(ids, nativeIDs) {
		t.Errorf("streamed ids from the tab differ from the native run:\n tab    %v\n native %v", ids, nativeIDs)
	}
	if !equalInts(final.line.IDs, nativeIDs) {
		t.Errorf("final ids %v, want the native %v", final.line.IDs, nativeIDs)
	}
	if got := storiesPrompt + text.String(); got != storiesText {
		t.Errorf("streamed text:\n got %q\nwant %q", got, storiesText)
	}
	if final.line.Worker != tab || final.line.Backend != "cpu" || final.line.FinishReason != "length" {
		t.Errorf("final: worker %q backend %q finish %q; want %s, cpu, length", final.line.Worker, final.line.Backend, final.line.FinishReason, tab)
	}

	// Streamed, not one burst: the lines arrive spread over the
	// generation, each token on its own (at 0.1 ms resolution) for most.
	distinct := map[time.Duration]bool{}
	for _, a := range toks {
		distinct[a.at.Sub(start).Truncate(100*time.Microsecond)] = true
	}
	first, last := toks[0].at, toks[len(toks)-1].at
	spread := last.Sub(first)
	t.Logf("remote run on %s: %d tokens, first after %v, spread over %v, %d distinct arrival times (0.1 ms), summary %v after the last token; server ttft %.1f ms, total %.1f ms, decode %.0f tok/s",
		tab, len(toks), first.Sub(start).Round(time.Millisecond), spread.Round(time.Microsecond), len(distinct),
		final.at.Sub(last).Round(time.Microsecond), final.line.TTFTMs, final.line.TotalMs, final.line.DecodeTokS)
	if len(distinct) < len(toks)/4 {
		t.Errorf("tokens arrived in %d distinct instants out of %d: not streamed", len(distinct), len(toks))
	}
	if spread <= 0 {
		t.Errorf("all tokens arrived at once")
	}
	if final.line.TTFTMs >= final.line.TotalMs {
		t.Errorf("server saw the first token at %.1f ms of %.1f ms: not streamed", final.line.TTFTMs, final.line.TotalMs)
	}
}

// TestRemoteWorkerToken: on a server started with --token, the tab opened
// with &token= fetches the model files with the bearer header (the server
// answers 401 without it) and serves a generation.
func TestRemoteWorkerToken(t *testing.T) {
	needBrowser(t)
	gguf := needShared(t, "fixtures/models/stories260K.gguf")
	bin := cli(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const token = "e2e-secret-token"
	srv := serveCLI(t, bin, bundle(t), gguf, "--token", token)
	if r, err := http.Get(srv.url() + "/models/stories260K/"); err != nil || r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("model listing without the token: %v %v, want 401", r, err)
	}
	b := newBrowser(t, false, "")
	b.open(srv.url() + "/?worker=1&name=e2e-token-tab&model=stories260K&token=" + token)
	var st struct {
		Status    string `json:"status"`
		Worker    string `json:"worker"`
		Loaded    string `json:"loaded"`
		LoadError string `json:"loadError"`
		LastError string `json:"lastError"`
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		b.mustEval(`window.cortiqRemote`, &st, 5*time.Second)
		if st.LoadError != "" {
			t.Fatalf("the tab could not load the model: %s", st.LoadError)
		}
		if st.Status == "attached" && st.Loaded == "stories260K" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tab state after 60 s: %+v", st)
		}
		time.Sleep(200 * time.Millisecond)
	}
	c, err := server.Dial(ctx, srv.url(), token)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	n := 0
	res, err := c.Generate(ctx, &server.Msg{Worker: st.Worker, Prompt: storiesPrompt, MaxTokens: 8}, func(server.Token) error { n++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if n != 8 || res.FinishReason != "length" {
		t.Errorf("generation on the tab: %d tokens, finish %q; want 8, length", n, res.FinishReason)
	}
	var href string
	b.mustEval(`location.href`, &href, 5*time.Second)
	if strings.Contains(href, token) {
		t.Errorf("the token stayed in the address bar: %s", href)
	}
}
