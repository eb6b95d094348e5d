//go:build !js

// Command wasmworker runs a GOOS=js test binary inside a dedicated Web
// Worker of headless Chromium, for use as a `go test -exec` wrapper:
//
//	go build -o /tmp/wasmworker ./e2e/wasmtest/cmd/wasmworker
//	GOOS=js GOARCH=wasm go test -exec=/tmp/wasmworker ./storage/opfs/
//
// Unlike wasmbrowsertest (page main thread), Worker-only APIs such as OPFS
// sync access handles are available. The process environment is forwarded
// to the test binary; the exit code is the test binary's.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/cortiq/cortiq/e2e/wasmtest"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: wasmworker file.wasm [test flags]")
		os.Exit(2)
	}
	chrome, err := wasmtest.ChromiumPath()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	tmp, err := os.MkdirTemp("", "wasmworker-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	env := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	code, err := wasmtest.RunBinary(context.Background(), chrome, os.Args[1], tmp, wasmtest.Options{
		Package: os.Args[1],
		Args:    os.Args[2:],
		Env:     env,
		Timeout: 30 * time.Minute,
		Output:  os.Stdout,
	})
	os.RemoveAll(tmp)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}
