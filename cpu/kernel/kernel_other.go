//go:build !amd64 || purego

package kernel

const hasAVX2 = false

func useAVX2(bool) {}
