//go:build !linux

package kernel

func allocWeights(owner *packedW, n, slack int) []byte { return nil }
