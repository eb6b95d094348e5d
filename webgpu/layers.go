package webgpu

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseLayerRanges parses a CORTIQ_GPU_LAYERS value ("0-9,20-29", "0,2,4",
// "5") into a per-layer selection for a model of n layers. An empty or
// all-space spec selects every layer. Ranges are inclusive; a range reaching
// past the last layer is clipped (so "0-999" means all), but a malformed
// spec or a reversed range is an error naming it.
func ParseLayerRanges(spec string, n int) ([]bool, error) {
	sel := make([]bool, n)
	spec = strings.TrimSpace(spec)
	if spec == "" {
		for i := range sel {
			sel[i] = true
		}
		return sel, nil
	}
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		lo, hi := part, part
		if i := strings.IndexByte(part, '-'); i >= 0 {
			lo, hi = strings.TrimSpace(part[:i]), strings.TrimSpace(part[i+1:])
		}
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil || a < 0 || b < a {
			return nil, fmt.Errorf("layer ranges %q: bad range %q (want e.g. 0-9,20-29)", spec, part)
		}
		for i := a; i <= b && i < n; i++ {
			sel[i] = true
		}
	}
	return sel, nil
}
