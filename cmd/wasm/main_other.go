//go:build !js

package main

import (
	"fmt"
	"os"
)

// The engine for the browser only exists as GOOS=js GOARCH=wasm; natively
// this command just says how to build it.
func main() {
	fmt.Fprintln(os.Stderr, "cmd/wasm is the browser build: make wasm (GOOS=js GOARCH=wasm go build -o web/cortiq.wasm ./cmd/wasm)")
	os.Exit(2)
}
