// Package probe holds GOOS=js tests that exercise the wasmtest harness itself
// and record what the browser's OPFS actually does.
package probe
