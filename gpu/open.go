package gpu

import (
	"errors"

	"github.com/cogentcore/webgpu/wgpu"
)

// Options tune Open. The zero value opens a device for normal use.
type Options struct {
	// Profile holds the profiling aids; cmd/native sets them from
	// CORTIQ_GPU_PROFILE, CORTIQ_GPU_SKIP and CORTIQ_GPU_DUP.
	Profile Profile
}

// Profile holds the profiling aids of one device. The zero value profiles
// nothing.
type Profile struct {
	// Timestamps times every dispatch on the GPU: Run gives each dispatch
	// its own compute pass between two timestamps and waits for them, so a
	// profiled run is slower and its steps serialize, but the per-kernel
	// times say where a step's time goes (ProfileReport). Native only, and
	// only on an adapter with timestamp queries; ignored otherwise.
	Timestamps bool
	// Skip and Dup list label substrings whose dispatches Run leaves out
	// (Skip) or issues twice (Dup): a profiling aid that attributes a
	// step's time to kernel classes by difference. Results are garbage
	// while either is set. Empty strings match nothing.
	Skip, Dup []string
}

// ErrNoInfo is Adapter's error where an adapter cannot be described
// without acquiring a device (the browser build).
var ErrNoInfo = errors.New("webgpu: the adapter is not described apart from its device here")

// Adapter describes the adapter Open would acquire without creating a
// device on it (nothing allocated; the adapter is released). It fails as
// Open does when there is none (ErrNoAdapter), and with ErrNoInfo where it
// cannot tell.
func Adapter() (AdapterInfo, error) {
	info, _, err := describeAdapter()
	return info, err
}

// AdapterLimits is Adapter with the adapter's limits: those Open asks its
// device for (`cortiq devices` lists them without creating a device).
func AdapterLimits() (AdapterInfo, wgpu.Limits, error) { return describeAdapter() }

// Open acquires the platform's best adapter and a device with the adapter's
// full limits. It returns an error wrapping ErrNoAdapter when there is none.
func Open(opts Options) (*Device, error) {
	d, err := openDevice(opts)
	if err != nil {
		return nil, err
	}
	d.skip = append([]string(nil), opts.Profile.Skip...)
	d.dup = append([]string(nil), opts.Profile.Dup...)
	return d, nil
}
