//go:build !js

package wasmtest

import (
	"context"
	"os"
	"strings"
	"testing"
)

// TestProbe checks the harness end to end and logs what Chromium's OPFS does
// (see internal/probe); run with -v to read the measurements.
func TestProbe(t *testing.T) {
	NeedChromium(t, "wasmtest")
	code, err := Run(context.Background(), Options{
		Package: "./internal/probe",
		Args:    []string{"-test.v"},
		Env:     map[string]string{"X": "y"},
		Output:  os.Stdout,
	})
	if err != nil {
		t.Fatal(err)
	}
	if code != 0 {
		t.Fatalf("probe exited with code %d", code)
	}
}

func TestFailureExitCode(t *testing.T) {
	NeedChromium(t, "wasmtest")
	var out strings.Builder
	code, err := Run(context.Background(), Options{
		Package: "./internal/probe",
		Args:    []string{"-test.run=TestFailWhenAsked"},
		Env:     map[string]string{"PROBE_FAIL": "1"},
		Output:  &out,
	})
	if err != nil {
		t.Fatal(err)
	}
	if code == 0 || !strings.Contains(out.String(), "failing as asked") {
		t.Fatalf("exit code %d, output %q; want a failure", code, out.String())
	}
}
