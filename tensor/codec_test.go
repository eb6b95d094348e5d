package tensor

import "testing"

func TestByteLenOverflow(t *testing.T) {
	if _, err := ByteLen(F32, []int{1 << 40, 1 << 40, 4}); err == nil {
		t.Fatal("huge shape accepted")
	}
	if n, err := ByteLen(Q8_0, []int{3, 64}); err != nil || n != 3*2*34 {
		t.Fatalf("ByteLen = %d, %v", n, err)
	}
	if _, err := ByteLen(Q4_0, []int{2, 33}); err == nil {
		t.Fatal("partial block accepted")
	}
}
