package gpu

// Open acquires the platform's best adapter and a device with the adapter's
// full limits. It returns an error wrapping ErrNoAdapter when there is none.
func Open() (*Device, error) { return openDevice() }
