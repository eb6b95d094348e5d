//go:build !amd64 || purego

package kernel

// spinPause is a polling loop's pause (a no-op here).
func spinPause() {}
