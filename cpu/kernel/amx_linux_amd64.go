//go:build amd64 && !purego

package kernel

import (
	"syscall"

	"golang.org/x/sys/cpu"
)

// amxUsable asks Linux for the AMX tile state (arch_prctl
// ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), which a process must hold
// before its first tile instruction.
func amxUsable() bool {
	if !cpu.X86.HasAMXTile || !cpu.X86.HasAMXInt8 {
		return false
	}
	const archReqXcompPerm, xfeatureXtiledata = 0x1023, 18
	_, _, errno := syscall.RawSyscall(syscall.SYS_ARCH_PRCTL, archReqXcompPerm, xfeatureXtiledata, 0)
	return errno == 0
}
