//go:build amd64 && !purego && !linux

package kernel

func amxUsable() bool { return false }
