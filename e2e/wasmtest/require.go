//go:build !js

package wasmtest

import (
	"os"
	"testing"
)

// RequireEnv names the environment variable that turns a missing browser
// from a skip into a failure. .ci/run sets it, so CI cannot pass with
// every browser test silently skipped.
const RequireEnv = "CORTIQ_REQUIRE_BROWSER"

// NeedChromium returns the Chromium executable for a browser test. Without
// one the test is skipped with the reason, or fails when
// CORTIQ_REQUIRE_BROWSER=1. In -short mode browser tests are skipped either
// way.
func NeedChromium(tb testing.TB, what string) string {
	tb.Helper()
	if testing.Short() {
		tb.Skipf("%s: browser test skipped in -short mode", what)
	}
	p, err := ChromiumPath()
	if msg, fail := browserMissing(what, err, os.Getenv(RequireEnv) == "1"); msg != "" {
		if fail {
			tb.Fatal(msg)
		}
		tb.Skip(msg)
	}
	return p
}

// browserMissing is what a test does without a browser: "" when err is
// nil, else the message and whether it is a failure (require set).
func browserMissing(what string, err error, require bool) (msg string, fail bool) {
	if err == nil {
		return "", false
	}
	if require {
		return what + ": " + RequireEnv + "=1 but no browser: " + err.Error(), true
	}
	return what + ": SKIPPING browser tests: " + err.Error(), false
}
