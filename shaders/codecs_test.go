package shaders

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cortiq/cortiq/tensor"
)

// TestDeviceCodecs checks every GPU codec record against its layout: Pack
// gives whole device blocks (or a planar codec's two planes), padded blocks
// start on 16-byte boundaries, a load's chunk divides the block, and a
// partial block is refused.
func TestDeviceCodecs(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, d := range deviceCodecs {
		t.Run(d.Codec.String(), func(t *testing.T) {
			c := d.Codec
			if DeviceCodecOf(c) != d || !Supported(c) || ChunkOf(c) != d.Chunk {
				t.Fatal("lookup disagrees with the table")
			}
			if d.Stages != nil {
				// Run as two products in other codecs (blr): no layout or
				// prelude of its own, and not among the codecs kernels read.
				if !Staged(c) || slices.Contains(Codecs, c) || d.prelude != nil || d.Pack != nil || d.Chunk != 0 {
					t.Fatal("a staged codec with a layout of its own")
				}
				return
			}
			if d.Chunk <= 0 || (c.BlockLen() > 1 && c.BlockLen()%d.Chunk != 0 && d.Chunk%c.BlockLen() != 0) {
				t.Fatalf("chunk %d for blocks of %d elements", d.Chunk, c.BlockLen())
			}
			if (d.Grid != nil) != (tensor.GridBytes(c) != nil) || (d.Grid != nil && !d.padded) {
				t.Fatalf("grid %d bytes, padded %v", len(d.Grid), d.padded)
			}
			if d.padded && d.Block%16 != 0 {
				t.Fatalf("padded block of %d bytes", d.Block)
			}
			const n = 3
			bb := c.BlockBytes()
			src := make([]byte, n*bb)
			for i := range src {
				src[i] = byte(r.IntN(256))
			}
			if d.Pack == nil {
				if d.Block != bb || d.padded || d.Planar {
					t.Fatalf("unpacked codec with device block %d (GGUF %d)", d.Block, bb)
				}
				return
			}
			data, soff, err := d.Pack(nil, src)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case d.Planar:
				if d.QBytes+2 != bb || len(data) != n*d.QBytes+(2*n+3)&^3 || int(soff) != n*d.QBytes/4 {
					t.Fatalf("planar: %d bytes, soff %d", len(data), soff)
				}
			case len(data) != n*d.Block || soff != 0:
				t.Fatalf("%d bytes, soff %d; want %d blocks of %d", len(data), soff, n, d.Block)
			}
			// dst is reused when large enough.
			again, _, err := d.Pack(make([]byte, 0, 2*len(data)), src)
			if err != nil || string(again) != string(data) {
				t.Fatalf("Pack into a reused buffer differs (%v)", err)
			}
			if bb > 1 {
				if _, _, err := d.Pack(nil, src[:len(src)-1]); err == nil {
					t.Fatal("a partial block accepted")
				}
			}
		})
	}
}
