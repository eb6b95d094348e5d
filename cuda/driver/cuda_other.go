//go:build !linux

package driver

import (
	"fmt"
	"runtime"
)

// Context is not available on this system.
type Context struct{ Device }

func unsupported() error {
	return fmt.Errorf("%w: the cuda backend is built for linux only (GOOS=%s)", ErrNoDriver, runtime.GOOS)
}

// Devices says why there are none.
func Devices() ([]Info, error) { return nil, unsupported() }

// DeviceInfo says why there is none.
func DeviceInfo(ordinal int) (Info, error) { return Info{}, unsupported() }

// Open says why there is none.
func Open(ordinal int) (*Context, error) { return nil, unsupported() }
