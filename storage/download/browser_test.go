//go:build !js

package download

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cortiq/cortiq/e2e/wasmtest"
)

// browserData is what the browser-side tests download (see
// browser_js_test.go, which regenerates it to check the result).
const browserDataLen = 3<<20 + 777

// TestInChromium runs this package's GOOS=js tests in a dedicated Worker of
// headless Chromium, downloading from a native server on the page's origin
// into OPFS. Set DOWNLOAD_TEST_RUN to pass a -test.run pattern through.
func TestInChromium(t *testing.T) {
	wasmtest.NeedChromium(t, "download")
	var (
		mu  sync.Mutex
		srv = newFileServer(testData(browserDataLen))
	)
	mux := http.NewServeMux()
	mux.HandleFunc("/reset", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		srv = newFileServer(testData(browserDataLen))
		if s := r.URL.Query().Get("failAt"); s != "" {
			n, _ := strconv.ParseInt(s, 10, 64)
			srv.failAt = []int64{n}
		}
		// Chromium drops bytes still buffered when the connection aborts;
		// give it time to hand them to the reader first.
		srv.abortDelay = 300 * time.Millisecond
		srv.ignoreRange = r.URL.Query().Get("ignoreRange") != ""
	})
	mux.HandleFunc("/seen", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		s := srv
		mu.Unlock()
		ranges, ifRanges := s.seen()
		json.NewEncoder(w).Encode(map[string][]string{"ranges": ranges, "ifRanges": ifRanges})
	})
	mux.HandleFunc("/blob", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		s := srv
		mu.Unlock()
		s.ServeHTTP(w, r)
	})
	args := []string{"-test.v", "-test.run=Browser"}
	if r := os.Getenv("DOWNLOAD_TEST_RUN"); r != "" {
		args = []string{"-test.v", "-test.run=" + r}
	}
	var buf bytes.Buffer
	var out io.Writer = &buf
	if testing.Verbose() {
		out = os.Stdout
	}
	code, err := wasmtest.Run(context.Background(), wasmtest.Options{
		Package: ".",
		Args:    args,
		Handler: mux,
		Timeout: 5 * time.Minute,
		Output:  out,
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, buf.Bytes())
	}
	if code != 0 {
		t.Fatalf("GOOS=js tests failed in Chromium (exit code %d):\n%s", code, buf.Bytes())
	}
}
