//go:build !js

package wasmtest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestRequireBrowser: without a browser a browser test is skipped, loudly
// naming the reason; with CORTIQ_REQUIRE_BROWSER=1 (as .ci/run sets) the
// same test fails. It reruns this test binary on TestProbe with CHROMIUM
// pointing nowhere.
func TestRequireBrowser(t *testing.T) {
	if os.Getenv("WASMTEST_CHILD") == "1" {
		t.Skip("child run")
	}
	run := func(require string) (string, bool) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestProbe$", "-test.v", "-test.short=false")
		cmd.Env = append(os.Environ(), "WASMTEST_CHILD=1", "CHROMIUM=/nonexistent/chromium", RequireEnv+"="+require)
		out, err := cmd.CombinedOutput()
		return string(out), err == nil
	}
	if out, ok := run(""); !ok || !strings.Contains(out, "SKIPPING browser tests") || !strings.Contains(out, "/nonexistent/chromium") {
		t.Errorf("no browser, not required: ok=%v, output:\n%s\nwant a skip naming the missing browser", ok, out)
	}
	if out, ok := run("1"); ok || !strings.Contains(out, RequireEnv+"=1") {
		t.Errorf("no browser, %s=1: ok=%v, output:\n%s\nwant a failure", RequireEnv, ok, out)
	}
}
