//go:build !js

package gpu

import "testing"

// TestAdapter: Adapter and AdapterLimits describe the adapter Open
// acquires (its info; the limits Open asks its device for) without
// creating a device.
func TestAdapter(t *testing.T) {
	d := testDevice(t)
	old := openDevice
	opened := 0
	openDevice = func(o Options) (*Device, error) { opened++; return old(o) }
	defer func() { openDevice = old }()
	info, err := Adapter()
	if err != nil {
		t.Fatal(err)
	}
	info2, lim, err := AdapterLimits()
	if err != nil {
		t.Fatal(err)
	}
	if opened != 0 {
		t.Errorf("Adapter opened %d devices", opened)
	}
	if info != d.Info() || info2 != info {
		t.Errorf("Adapter %+v, AdapterLimits %+v, the device's %+v", info, info2, d.Info())
	}
	if dl := d.Limits(); lim.MaxStorageBufferBindingSize != dl.MaxStorageBufferBindingSize || lim.MaxComputeWorkgroupStorageSize != dl.MaxComputeWorkgroupStorageSize {
		t.Errorf("adapter limits %+v, the device's %+v", lim, dl)
	}
}
