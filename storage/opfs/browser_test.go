//go:build !js

package opfs_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"testing"
	"time"

	"github.com/cortiq/cortiq/e2e/wasmtest"
)

// TestInChromium runs this package's GOOS=js tests (the hackpadfs
// conformance suite on OPFS among them) inside a dedicated Worker of headless
// Chromium. Set OPFS_TEST_RUN to pass a -test.run pattern through.
func TestInChromium(t *testing.T) {
	wasmtest.NeedChromium(t, "opfs")
	args := []string{"-test.v"}
	if r := os.Getenv("OPFS_TEST_RUN"); r != "" {
		args = append(args, "-test.run="+r)
	}
	// Stream the browser's output under -v; otherwise show it on failure.
	var buf bytes.Buffer
	var out io.Writer = &buf
	if testing.Verbose() {
		out = os.Stdout
	}
	code, err := wasmtest.Run(context.Background(), wasmtest.Options{
		Package: ".",
		Args:    args,
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

// TestMainThreadInChromium checks the documented failure on a page's main
// thread, where sync access handles do not exist.
func TestMainThreadInChromium(t *testing.T) {
	wasmtest.NeedChromium(t, "opfs")
	var buf bytes.Buffer
	code, err := wasmtest.Run(context.Background(), wasmtest.Options{
		Package:    ".",
		Args:       []string{"-test.v", "-test.run=TestMainThreadNoSyncAccess"},
		Timeout:    5 * time.Minute,
		Output:     &buf,
		MainThread: true,
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, buf.Bytes())
	}
	if code != 0 || !bytes.Contains(buf.Bytes(), []byte("--- PASS: TestMainThreadNoSyncAccess")) {
		t.Fatalf("exit code %d:\n%s", code, buf.Bytes())
	}
	t.Logf("%s", buf.Bytes())
}
