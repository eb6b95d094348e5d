package engine

import (
	"os"
	"testing"

	"github.com/cortiq/cortiq/fixtures"
)

// TestMain: the tests write no cache outside temporary directories.
func TestMain(m *testing.M) { os.Exit(fixtures.RunHermetic(m)) }
