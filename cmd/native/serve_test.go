package main

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cortiq/cortiq/fixtures"
)

// syncBuffer is a bytes.Buffer safe for a child's writes and our reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startServe runs `cortiq serve ARGS --addr A` in dir until /healthz
// answers; the returned function stops it and returns its stderr.
func startServe(t *testing.T, dir string, env []string, args ...string) (string, func() string) {
	t.Helper()
	addr := freeAddr(t)
	cmd := exec.Command(cortiqBin, append(append([]string{"serve"}, args...), "--addr", addr)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr syncBuffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	stop := func() string {
		cmd.Process.Signal(os.Interrupt)
		<-exited
		return stderr.String()
	}
	url := "http://" + addr
	for {
		if r, err := http.Get(url + "/healthz"); err == nil {
			r.Body.Close()
			return url, stop
		}
		select {
		case <-exited:
			t.Fatalf("cortiq serve exited: %s", stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	r, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return r.StatusCode, string(b)
}

// TestServeOutsideRepo: started away from the repository root, serve still
// answers / with the page (its sources are built in) and the missing
// engine bundle with how to build it, and says so on stderr.
func TestServeOutsideRepo(t *testing.T) {
	stories := filepath.Join(fixtures.Dir(t), "fixtures", "models", "stories260K.gguf")
	url, stop := startServe(t, t.TempDir(), nil, "-m", stories, "--backend", "cpu")
	code, body := httpGet(t, url+"/")
	if code != 200 || !strings.Contains(body, "<html") {
		t.Errorf("GET / = %d %.80q, want the page", code, body)
	}
	code, body = httpGet(t, url+"/wasm_exec.js")
	if code != 404 || !strings.Contains(body, "make wasm") || !strings.Contains(body, "--web") {
		t.Errorf("GET /wasm_exec.js = %d %q, want a 404 saying to run make wasm and pass --web", code, body)
	}
	if stderr := stop(); !strings.Contains(stderr, "make wasm") {
		t.Errorf("serve's stderr says nothing about the missing bundle:\n%s", stderr)
	}
}

// TestLoadProgress: a device load names its stages on stderr and how long
// it took (a 17 s webgpu load printed nothing).
func TestLoadProgress(t *testing.T) {
	stories := filepath.Join(fixtures.Dir(t), "fixtures", "models", "stories260K.gguf")
	_, stderr, code := cortiqIn(t, nil, "", "run", "-m", stories, "-n", "2", "--temp", "0", "--backend", "webgpu")
	if code != 0 || !strings.Contains(stderr, "uploading the weights") || !strings.Contains(stderr, "cortiq: loaded on ") {
		t.Errorf("run --backend webgpu: exit %d, stderr %q; want the load's stages and time", code, stderr)
	}
}
