//go:build !unix && !js

package cpu

import "time"

// cpuTime is 0 where the tests do not read the CPU time.
func cpuTime() time.Duration { return 0 }
