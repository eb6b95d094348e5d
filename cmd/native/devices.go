//go:build !js

package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"

	"github.com/cortiq/cortiq/cuda/driver"
	"github.com/cortiq/cortiq/gpu"
	"github.com/cortiq/cortiq/probe"
)

func init() {
	register("devices", "devices [--json]", "list the WebGPU adapter, its limits, the CUDA devices and the probe's verdicts", cmdDevices)
}

func cmdDevices(args []string) error {
	fs := newFlags("devices")
	jsonOut := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
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
		CPUCores  int              `json:"cpu_cores"`
	}{CPUCores: numCPU()}
	if dev, err := gpu.Open(gpu.Options{}); err != nil {
		out.Error = err.Error()
	} else {
		info := dev.Info()
		l := dev.Limits()
		out.Adapter = &info
		out.Limits = &limits{l.MaxBufferSize, l.MaxStorageBufferBindingSize, l.MaxComputeWorkgroupStorageSize,
			l.MaxComputeInvocationsPerWorkgroup, l.MaxStorageBuffersPerShaderStage}
		dev.Close()
	}
	if cd, err := driver.Devices(); err != nil {
		out.CUDAError = err.Error()
	} else {
		out.CUDA = cd
	}
	if p := probeCachePath(); p != "" {
		if data, err := os.ReadFile(p); err == nil {
			if entries, err := probe.ParseCache(data); err == nil {
				out.Probe = entries
			}
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
	if len(out.Probe) == 0 {
		fmt.Printf("probe       no verdicts cached\n")
	}
	for _, e := range out.Probe {
		fmt.Printf("probe       %-24s %-6s (%s, engine %s)\n", e.Class, e.Winner, e.Device, e.Version)
	}
	return nil
}
