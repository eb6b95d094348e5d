// Package web holds the browser page's sources (the page, its scripts and
// stylesheet), embedded so that `cortiq serve` serves the page from any
// working directory. The engine bundle — cortiq.wasm and Go's
// wasm_exec.js — is what `make wasm` writes next to them; it is a build
// output and is not embedded.
package web

import "embed"

// Page is the page's sources, at the root of the FS.
//
//go:embed index.html app.css app.js cortiq.js remote.js worker.js
var Page embed.FS

// Bundle names the files `make wasm` builds into web/.
var Bundle = []string{"cortiq.wasm", "wasm_exec.js"}
