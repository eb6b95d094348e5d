package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cortiq/cortiq/fixtures"
	"github.com/cortiq/cortiq/server"
)

// fakeHub plays a Hugging Face hub (HF_ENDPOINT) that serves data for every
// file, honest or lying as mode says.
type fakeHub struct {
	mu     sync.Mutex
	mode   string // "good", "garbage" (right length), "401", "404", "stall" (half, then nothing)
	data   []byte
	ranges []string
	half   chan struct{} // closed once a "stall" answer has sent its first half
}

func (h *fakeHub) set(mode string) {
	h.mu.Lock()
	h.mode = mode
	h.mu.Unlock()
}

func (h *fakeHub) seen() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.ranges...)
}

func (h *fakeHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	mode, data := h.mode, h.data
	h.ranges = append(h.ranges, r.Header.Get("Range"))
	h.mu.Unlock()
	switch mode {
	case "401":
		http.Error(w, "Invalid credentials", http.StatusUnauthorized)
		return
	case "404":
		http.Error(w, "Entry not found", http.StatusNotFound)
		return
	case "garbage":
		data = bytes.Repeat([]byte{0x47}, len(data))
	}
	w.Header().Set("ETag", `"v1"`)
	start := 0
	if rng := r.Header.Get("Range"); rng != "" && mode == "good" {
		start, _ = strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(rng, "bytes="), "-"))
		w.Header().Set("Content-Range", "bytes "+strconv.Itoa(start)+"-"+strconv.Itoa(len(data)-1)+"/"+strconv.Itoa(len(data)))
		w.Header().Set("Content-Length", strconv.Itoa(len(data)-start))
		w.WriteHeader(http.StatusPartialContent)
		w.Write(data[start:])
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	if mode != "stall" {
		w.Write(data)
		return
	}
	w.Write(data[:len(data)/2])
	w.(http.Flusher).Flush()
	close(h.half)
	<-r.Context().Done()
}

func startHub(t *testing.T, data []byte) (*fakeHub, []string) {
	t.Helper()
	h := &fakeHub{mode: "good", data: data, half: make(chan struct{})}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	env := []string{"HF_ENDPOINT=" + srv.URL, "CORTIQ_CACHE=" + t.TempDir(), "CORTIQ_MODEL_PATH=", "HF_TOKEN=", "TERM=dumb"}
	return h, env
}

func cacheOf(env []string) string {
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "CORTIQ_CACHE="); ok {
			return v
		}
	}
	panic("no CORTIQ_CACHE")
}

func runCortiq(env []string, args ...string) (stdout, stderr string, err error) {
	cmd := exec.Command(cortiqBin, args...)
	cmd.Env = append(os.Environ(), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

func stories260K(t *testing.T) []byte {
	p := filepath.Join(fixtures.Dir(t), "fixtures", "models", "stories260K.gguf")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Skipf("%s: %v", p, err)
	}
	return b
}

// A lying hub never gets its bytes into the cache; once it is good again
// the next run downloads the good file (issue 12 item 11).
func TestCLIDownloadLyingHubThenGood(t *testing.T) {
	data := stories260K(t)
	for _, tc := range []struct{ name, model, cached, want string }{
		{"pinned name", "stories260K", "stories260K.gguf", "checksum mismatch"},
		{"hub reference", "org/repo/x.gguf", "org/repo/x.gguf.gguf", "not valid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hub, env := startHub(t, data)
			hub.set("garbage")
			dst := filepath.Join(cacheOf(env), "models", filepath.FromSlash(tc.cached))
			_, stderr, err := runCortiq(env, "info", "-m", tc.model)
			if err == nil || !strings.Contains(stderr, tc.want) {
				t.Fatalf("lying hub: err %v, stderr:\n%s\nwant %q", err, stderr, tc.want)
			}
			for _, p := range []string{dst, dst + ".part", dst + ".part.json"} {
				if _, err := os.Stat(p); err == nil {
					t.Errorf("%s exists after a rejected download", p)
				}
			}
			hub.set("good")
			out, stderr, err := runCortiq(env, "info", "-m", tc.model)
			if err != nil || !strings.Contains(out, "layers") {
				t.Fatalf("good hub: %v\n%s%s", err, out, stderr)
			}
			b, err := os.ReadFile(dst)
			if sum := sha256.Sum256(b); err != nil || hex.EncodeToString(sum[:]) != "270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d" {
				t.Fatalf("cached %s: %v, sha256 %x", dst, err, sum)
			}
		})
	}
}

// 401 and 404 are answered at once, without retries; 401 names HF_TOKEN.
func TestCLIDownloadPermanentErrors(t *testing.T) {
	for _, code := range []string{"401", "404"} {
		t.Run(code, func(t *testing.T) {
			hub, env := startHub(t, []byte("x"))
			hub.set(code)
			_, stderr, err := runCortiq(env, "info", "-m", "org/repo/x.gguf")
			if err == nil || !strings.Contains(stderr, "HTTP "+code) {
				t.Fatalf("err %v, stderr:\n%s", err, stderr)
			}
			if code == "401" && !strings.Contains(stderr, "HF_TOKEN") {
				t.Errorf("401 without a hint about HF_TOKEN:\n%s", stderr)
			}
			if n := len(hub.seen()); n != 1 {
				t.Errorf("%d requests, want 1 (no retries)", n)
			}
		})
	}
}

// SIGTERM during a download keeps the partial file, and the next run
// resumes it (issue 12 item 22).
func TestCLIDownloadResumesAfterSIGTERM(t *testing.T) {
	data := stories260K(t)
	hub, env := startHub(t, data)
	hub.set("stall")
	dst := filepath.Join(cacheOf(env), "models", "stories260K.gguf")
	cmd := exec.Command(cortiqBin, "info", "-m", "stories260K")
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	<-hub.half
	half := int64(len(data) / 2)
	for i := 0; ; i++ {
		if fi, err := os.Stat(dst + ".part"); err == nil && fi.Size() >= half {
			break
		}
		if i == 1000 {
			cmd.Process.Kill()
			t.Fatalf("the part never reached %d bytes", half)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err == nil {
		t.Fatal("an interrupted download exited 0")
	}
	if !strings.Contains(stderr.String(), "run again to resume") {
		t.Errorf("stderr does not say the download can resume:\n%s", stderr.String())
	}
	if fi, err := os.Stat(dst + ".part"); err != nil || fi.Size() != half {
		t.Fatalf("part after SIGTERM: %v, %v; want %d bytes", fi, err, half)
	}
	hub.set("good")
	if _, se, err := runCortiq(env, "info", "-m", "stories260K"); err != nil {
		t.Fatalf("resume: %v\n%s", err, se)
	}
	if r := hub.seen(); r[len(r)-1] != "bytes="+strconv.FormatInt(half, 10)+"-" {
		t.Errorf("the run after SIGTERM sent Range %q, want a resume from %d", r, half)
	}
}

// The websocket "load" message goes through the same resolver: a hub-style
// name with ".." is refused before anything is fetched or written
// (issue 12 item 15).
func TestCLIServeLoadRejectsTraversal(t *testing.T) {
	model := filepath.Join(fixtures.Dir(t), "fixtures", "models", "stories260K.gguf")
	if _, err := os.Stat(model); err != nil {
		t.Skipf("%s: %v", model, err)
	}
	hub, env := startHub(t, []byte("x"))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(cortiqBin, "serve", "--addr", addr, "--backend", "cpu", "-m", model)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var c *server.Client
	for c == nil {
		if c, err = server.Dial(ctx, "http://"+addr, ""); err != nil {
			if ctx.Err() != nil {
				t.Fatalf("server never answered: %v\n%s", err, stderr.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	defer c.Close()
	cache := cacheOf(env)
	for _, name := range []string{"a/b/../../../../tmp/x.gguf", "a/b/../../../x.gguf", `a/b/..\..\x.gguf`} {
		_, err := c.Load(ctx, "", name, nil)
		if err == nil || !strings.Contains(err.Error(), "invalid model name") {
			t.Errorf("load %q: %v, want an invalid-name error", name, err)
		}
	}
	if n := len(hub.seen()); n != 0 {
		t.Errorf("the hub got %d requests", n)
	}
	if ents, _ := os.ReadDir(filepath.Dir(cache)); len(ents) != 1 {
		t.Errorf("written beside the cache: %v", ents)
	}
}
