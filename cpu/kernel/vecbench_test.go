package kernel

import "testing"

func BenchmarkSiLU4864(b *testing.B) {
	x := make([]float32, 4864)
	for i := range x { x[i] = float32(i%100)/10 - 5 }
	b.SetBytes(4864 * 4)
	for b.Loop() { SiLU(x); for i := range x { x[i] = float32(i%100)/10 - 5 } }
}
func BenchmarkFill4864(b *testing.B) {
	x := make([]float32, 4864)
	for b.Loop() { for i := range x { x[i] = float32(i%100)/10 - 5 } }
}
func BenchmarkGELU4864(b *testing.B) {
	x := make([]float32, 4864)
	for b.Loop() { GELUTanh(x); for i := range x { x[i] = float32(i%100)/10 - 5 } }
}
func BenchmarkSoftmax1024(b *testing.B) {
	x := make([]float32, 1024)
	for b.Loop() { for i := range x { x[i] = float32(i%100)/10 - 5 }; Softmax(x) }
}
