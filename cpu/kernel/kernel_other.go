//go:build (!amd64 && !arm64) || purego

package kernel

const hasAVX2 = false

const detected = Generic

var archLevels = []Level{Generic}

func applyLevel(l Level) { level = l }

func simdLen(int) int { return 0 }

func axpySIMD(dst, x *float32, a float32, n int) {}
func addSIMD(dst, a *float32, n int)             {}
func mulSIMD(dst, a *float32, n int)             {}
func scaleSIMD(x *float32, s float32, n int)     {}

func runPacked(*matvec, int, int) { panic("kernel: no packed kernels in this build") }

func matmulsInt8([]float32, int, []Product) bool { return false }

func dotRowsSIMD(dst, q, k []float32, stride int) bool { return false }
func axpyRowsSIMD(dst, a, x []float32, stride int) int { return 0 }

func allFiniteSIMD(x *float32, n int) bool { return true }
