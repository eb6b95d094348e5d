package kernel

import (
	"os"
	"testing"
)

// The tests check the Exact arithmetic unless they select Int8 themselves
// (mode_test.go), whatever the default mode.
func TestMain(m *testing.M) {
	SetMode(Exact)
	os.Exit(m.Run())
}
