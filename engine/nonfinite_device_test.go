//go:build !js

package engine

import (
	"context"
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/model"
	"github.com/cortiq/cortiq/tensor"
)

// On the WebGPU path (lavapipe in tests) a NaN in the weights is caught per
// token — by the greedy pick on the device (POISON) or the host's check of
// the logits — and the CPU replay names the layer; nothing is emitted as
// token 0 with success.
func TestDeviceNonFiniteNamesLayer(t *testing.T) {
	m := tinyModelWith(t, "blk.1.ffn_norm.weight", float32(math.NaN()))
	e, err := NewFromModel(m, Options{Backend: "webgpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if e.dev == nil {
		t.Skipf("no WebGPU adapter: %v", e.DeviceError())
	}
	for _, batch := range []int{0, 4} {
		res, err := e.Generate(context.Background(), Request{IDs: []int{1, 2, 3}, MaxTokens: 8, IgnoreEOS: true, GreedyBatch: batch}, nil)
		if err == nil || !strings.Contains(err.Error(), "layer 1's FFN output") {
			t.Errorf("greedy batch %d: Generate = %+v, %v; want an error naming layer 1's FFN", batch, res, err)
		}
	}
}

// A NaN reached only after the prompt (the embedding row of the first
// generated token) is caught by the device's greedy pick (POISON), and the
// CPU replay names the embedding.
func TestDeviceGreedyPoison(t *testing.T) {
	ids := []int{1, 2, 3}
	sound := tinyModelWith(t, "", 0)
	c, err := NewFromModel(sound, Options{Backend: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	first, err := c.Generate(context.Background(), Request{IDs: ids, MaxTokens: 1, IgnoreEOS: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	x := first.IDs[0]
	m := tinyModelEdit(t, model.TokenEmbd, func(c tensor.Codec, data []byte) {
		if c != tensor.Q8_0 {
			t.Fatalf("token_embd is %s, want q8_0", c)
		}
		rb, _ := c.RowBytes(64)
		binary.LittleEndian.PutUint16(data[x*rb:], 0x7E00) // the row's first block scale: an f16 NaN
	})
	e, err := NewFromModel(m, Options{Backend: "webgpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if e.dev == nil {
		t.Skipf("no WebGPU adapter: %v", e.DeviceError())
	}
	for _, batch := range []int{0, 4} {
		res, err := e.Generate(context.Background(), Request{IDs: ids, MaxTokens: 8, IgnoreEOS: true, GreedyBatch: batch}, nil)
		if err == nil || !strings.Contains(err.Error(), "the token embedding, at position 3") {
			t.Errorf("greedy batch %d: Generate = %+v, %v; want an error naming the embedding at position 3", batch, res, err)
		}
	}
}
