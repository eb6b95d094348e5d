//go:build amd64 && !purego

package kernel

var archLevels = []Level{Generic, AVX2, AVX512, AVX512VNNI, AMX}
