//go:build !js

package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/cortiq/cortiq/cuda/driver"
	"github.com/cortiq/cortiq/engine"
	"github.com/cortiq/cortiq/gpu"
	"github.com/cortiq/cortiq/probe"
)

func init() {
	register("devices", "devices [--json] [--forget all|stale|TEXT]", "list the WebGPU adapter, its limits, the CUDA devices and the probe's verdicts", cmdDevices)
}

func cmdDevices(args []string) error {
	fs := newFlags("devices")
	jsonOut := fs.Bool("json", false, "print JSON")
	forget := fs.String("forget", "", "first forget the probe's verdicts: all, stale (another engine version's), or those whose class or devices contain TEXT; the next --backend auto load measures again")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cachePath := probeCachePath()
	if *forget != "" {
		if cachePath == "" {
			return fmt.Errorf("--forget: no verdict file (CORTIQ_PROBE_CACHE is off)")
		}
		n, err := probe.Forget(cachePath, func(e probe.Entry) bool {
			switch *forget {
			case "all":
				return true
			case "stale":
				return e.Version != engine.ProbeVersion
			}
			return strings.Contains(e.Class, *forget) || strings.Contains(e.Device, *forget)
		})
		if err != nil {
			return fmt.Errorf("--forget: %w", err)
		}
		fmt.Fprintf(os.Stderr, "cortiq: forgot %d verdict(s) in %s\n", n, cachePath)
	}
	type limits struct {
		MaxBufferSize                  uint64 `json:"max_buffer_size"`
		MaxStorageBufferBindingSize    uint64 `json:"max_storage_buffer_binding_size"`
		MaxComputeWorkgroupStorageSize uint32 `json:"max_compute_workgroup_storage_size"`
		MaxComputeInvocations          uint32 `json:"max_compute_invocations_per_workgroup"`
		MaxStorageBuffersPerStage      uint32 `json:"max_storage_buffers_per_shader_stage"`
	}
	out := struct {
		Adapter   *gpu.AdapterInfo `json:"adapter,omitempty"`
		Error     string           `json:"error,omitempty"`
		Limits    *limits          `json:"limits,omitempty"`
		CUDA      []driver.Info    `json:"cuda,omitempty"`
		CUDAError string           `json:"cuda_error,omitempty"`
		Probe     []probe.Entry    `json:"probe_verdicts"`
		// ProbeCache is the verdict file, ProbeVersion the engine version
		// whose verdicts count (another's are stale: measured again).
		ProbeCache   string `json:"probe_cache,omitempty"`
		ProbeVersion string `json:"probe_version"`
		ProbeError   string `json:"probe_error,omitempty"`
		CPUCores     int    `json:"cpu_cores"`
	}{CPUCores: numCPU(), ProbeCache: cachePath, ProbeVersion: engine.ProbeVersion}
	// The adapter and the CUDA devices are described without creating a
	// device or a context: nothing is opened, nothing uploaded.
	if info, l, err := gpu.AdapterLimits(); err != nil {
		out.Error = err.Error()
	} else {
		out.Adapter = &info
		out.Limits = &limits{l.MaxBufferSize, l.MaxStorageBufferBindingSize, l.MaxComputeWorkgroupStorageSize,
			l.MaxComputeInvocationsPerWorkgroup, l.MaxStorageBuffersPerShaderStage}
	}
	if cd, err := driver.Devices(); err != nil {
		out.CUDAError = err.Error()
	} else {
		out.CUDA = cd
	}
	if cachePath != "" {
		if entries, err := probe.ReadCache(cachePath); err != nil {
			out.ProbeError = err.Error()
		} else {
			out.Probe = entries
		}
	}
	if *jsonOut {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	fmt.Printf("cpu         %d cores (always available)\n", out.CPUCores)
	if out.Adapter == nil {
		fmt.Printf("webgpu      none: %s\n", out.Error)
	} else {
		a := out.Adapter
		fmt.Printf("webgpu      %s (%s, %s, vendor %s, driver %s)\n", a.Name, a.Type, a.Backend, a.Vendor, a.Driver)
		fmt.Printf("limits      buffer %d MiB, storage binding %d MiB, workgroup storage %d KiB, %d invocations, %d storage buffers/stage\n",
			out.Limits.MaxBufferSize>>20, out.Limits.MaxStorageBufferBindingSize>>20, out.Limits.MaxComputeWorkgroupStorageSize>>10,
			out.Limits.MaxComputeInvocations, out.Limits.MaxStorageBuffersPerStage)
		fmt.Printf("features    f32 and packed-f16 (unpack2x16float) kernels; no shader-f16, subgroups or overrides needed\n")
	}
	if len(out.CUDA) == 0 {
		fmt.Printf("cuda        none: %s\n", cmp.Or(out.CUDAError, "no CUDA device"))
	}
	for _, d := range out.CUDA {
		fmt.Printf("cuda        %s\n", d)
	}
	switch {
	case out.ProbeError != "":
		fmt.Printf("probe       verdicts unreadable (measured again on load): %s\n", out.ProbeError)
	case len(out.Probe) == 0:
		fmt.Printf("probe       no verdicts cached\n")
	default:
		fmt.Printf("probe       verdicts in %s (cortiq devices --forget all|stale|TEXT)\n", cachePath)
	}
	for _, e := range out.Probe {
		fmt.Printf("probe       %s\n", verdictLine(e))
	}
	return nil
}

// verdictLine is one cached verdict for people: class, winner, the arms
// raced, and whether it is stale (another engine version's).
func verdictLine(e probe.Entry) string {
	winner, among := e.Winner, strings.Join(e.Arms, ", ")
	if slices.Equal(e.Arms, []string{probe.ArmDevice, probe.ArmHost}) {
		// A verdict of the two-arm probe: the device named by Device
		// against the CPU.
		if winner == probe.ArmDevice {
			winner = e.Device
		} else {
			winner = "cpu"
		}
		among = e.Device + ", cpu"
	}
	stale := ""
	if e.Version != engine.ProbeVersion {
		stale = "; stale: engine " + e.Version
	}
	return fmt.Sprintf("%-36s %s (among %s%s)", e.Class, winner, among, stale)
}
