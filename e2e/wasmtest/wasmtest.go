//go:build !js

// Package wasmtest runs a package's GOOS=js tests inside a dedicated Web
// Worker of headless Chromium and reports their output and exit status.
//
// It exists because some browser APIs the engine depends on are only
// available in Workers: OPFS sync access handles
// (FileSystemFileHandle.createSyncAccessHandle) are the prime example, and
// wasmbrowsertest runs tests on the page's main thread where they are absent.
//
// Run builds the test binary with `GOOS=js GOARCH=wasm go test -c`, serves it
// from a loopback httptest server together with a page that starts a Worker
// (worker.js) which instantiates the binary with Go's wasm_exec.js, and drives
// the page with chromedp. Output written by the test binary reaches
// Options.Output in order. An optional http.Handler is mounted under /srv/ on
// the same origin so browser-side tests can talk to a native test server
// without CORS; its base URL is passed to the test binary in the environment
// variable WASMTEST_SERVER.
//
// Each Run starts a fresh Chromium profile (a temporary --user-data-dir), so
// OPFS starts empty.
package wasmtest

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/chromedp/chromedp"
)

//go:embed index.html worker.js
var assets embed.FS

// ServerEnv is the environment variable through which the test binary learns
// the base URL (ending in "/srv/") of Options.Handler.
const ServerEnv = "WASMTEST_SERVER"

// Options configures one Run.
type Options struct {
	// Package is the package to test, as given to `go test -c` (an import
	// path or a ./relative directory resolved against Dir).
	Package string
	// Dir is the working directory of the go build; empty means the current
	// directory.
	Dir string
	// Args are the test binary's arguments, e.g. "-test.v", "-test.run=X".
	Args []string
	// Env is the test binary's environment inside the browser.
	Env map[string]string
	// Handler, if set, is served under /srv/ on the page's origin.
	Handler http.Handler
	// Timeout bounds the whole run, build excluded; zero means 5 minutes.
	Timeout time.Duration
	// Output receives the test binary's stdout and stderr; nil discards.
	Output io.Writer
	// MainThread runs the binary on the page's main thread instead of in a
	// Worker, to test behaviour where Worker-only APIs are missing.
	MainThread bool
}

// ErrNoChromium is returned (wrapped) by ChromiumPath and Run when no
// Chromium or Chrome executable can be found.
var ErrNoChromium = errors.New("wasmtest: no chromium/chrome executable found (install: apt-get install -y chromium, or set CHROMIUM)")

// ChromiumPath returns the browser executable: $CHROMIUM if set, else the
// first of chromium, chromium-browser, google-chrome, google-chrome-stable on
// PATH.
func ChromiumPath() (string, error) {
	if p := os.Getenv("CHROMIUM"); p != "" {
		if _, err := exec.LookPath(p); err != nil {
			return "", fmt.Errorf("%w: CHROMIUM=%s: %v", ErrNoChromium, p, err)
		}
		return p, nil
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", ErrNoChromium
}

// Build compiles the GOOS=js test binary of pkg into a file under tmpDir and
// returns its path.
func Build(ctx context.Context, dir, pkg, tmpDir string) (string, error) {
	out := filepath.Join(tmpDir, "test.wasm")
	cmd := exec.CommandContext(ctx, "go", "test", "-c", "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("wasmtest: building %s for js/wasm: %w\n%s", pkg, err, b)
	}
	return out, nil
}

// wasmExecPath finds the wasm_exec.js matching the go command that built
// the binary.
func wasmExecPath(ctx context.Context) (string, error) {
	goroot := ""
	if out, err := exec.CommandContext(ctx, "go", "env", "GOROOT").Output(); err == nil {
		goroot = strings.TrimSpace(string(out))
	}
	if goroot == "" {
		return "", errors.New("wasmtest: cannot determine GOROOT (is the go command on PATH?)")
	}
	p := filepath.Join(goroot, "lib", "wasm", "wasm_exec.js")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("wasmtest: wasm_exec.js: %w", err)
	}
	return p, nil
}

// Run builds and runs the tests of o.Package in a Worker and returns the
// test binary's exit code. A non-nil error means the harness itself failed
// (build, browser, timeout); test failures show as a non-zero exit code.
func Run(ctx context.Context, o Options) (int, error) {
	chrome, err := ChromiumPath()
	if err != nil {
		return -1, err
	}
	tmp, err := os.MkdirTemp("", "wasmtest-")
	if err != nil {
		return -1, fmt.Errorf("wasmtest: %w", err)
	}
	defer os.RemoveAll(tmp)

	bin, err := Build(ctx, o.Dir, o.Package, tmp)
	if err != nil {
		return -1, err
	}
	return RunBinary(ctx, chrome, bin, tmp, o)
}

// RunBinary runs an already built GOOS=js test binary in a Worker of the
// given browser executable, using profileRoot for the temporary profile.
func RunBinary(ctx context.Context, chrome, bin, profileRoot string, o Options) (int, error) {
	out := o.Output
	if out == nil {
		out = io.Discard
	}
	timeout := o.Timeout
	if timeout == 0 {
		timeout = 5 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	mux := http.NewServeMux()
	wasmExec, err := wasmExecPath(ctx)
	if err != nil {
		return -1, err
	}
	mux.HandleFunc("/wasm_exec.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		http.ServeFile(w, r, wasmExec)
	})
	mux.HandleFunc("/test.wasm", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/wasm")
		http.ServeFile(w, r, bin)
	})
	mux.HandleFunc("/worker.js", func(w http.ResponseWriter, r *http.Request) {
		b, _ := assets.ReadFile("worker.js")
		w.Header().Set("Content-Type", "text/javascript")
		w.Write(b)
	})
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) {
		b, _ := assets.ReadFile("index.html")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(b)
	})
	if o.Handler != nil {
		mux.Handle("/srv/", http.StripPrefix("/srv", o.Handler))
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()

	env := map[string]string{}
	for k, v := range o.Env {
		env[k] = v
	}
	if o.Handler != nil {
		env[ServerEnv] = srv.URL + "/srv/"
	}
	cfg, err := json.Marshal(map[string]any{"args": o.Args, "env": env, "mainThread": o.MainThread})
	if err != nil {
		return -1, fmt.Errorf("wasmtest: %w", err)
	}
	pageURL := srv.URL + "/#" + url.PathEscape(string(cfg))

	profile, err := os.MkdirTemp(profileRoot, "profile-")
	if err != nil {
		return -1, fmt.Errorf("wasmtest: %w", err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chrome),
		chromedp.UserDataDir(profile),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-gpu", true),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()

	if _, err := chromedp.Run(bctx, chromedp.Navigate(pageURL)); err != nil {
		return -1, fmt.Errorf("wasmtest: starting %s: %w", chrome, err)
	}
	type state struct {
		Out   string `json:"out"`
		Done  bool   `json:"done"`
		Code  int    `json:"code"`
		Error string `json:"error"`
	}
	for {
		s, err := chromedp.Run(bctx, chromedp.Evaluate[state](`window.__wasmtestTake()`))
		if err != nil {
			return -1, fmt.Errorf("wasmtest: polling page: %w", err)
		}
		io.WriteString(out, s.Out)
		if s.Done {
			if s.Error != "" {
				return -1, fmt.Errorf("wasmtest: worker failed: %s", strings.TrimSpace(s.Error))
			}
			return s.Code, nil
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("wasmtest: %s: %w", o.Package, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
