package cpu

import (
	"slices"
	"testing"

	"github.com/cortiq/cortiq/backend"
)

// TestStateRoundTrip: a session continued from another's exported state
// gives exactly the logits the original gives, and a malformed state is
// refused.
func TestStateRoundTrip(t *testing.T) {
	for _, name := range []string{"llama", "gemma2_sw8", "qwen2_moe", "lfm2", "qwen3_next"} {
		t.Run(name, func(t *testing.T) {
			m, _ := loadFixture(t, name)
			b, err := New(m, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			a, _ := b.newSession(32)
			ids := []int{5, 17, 33, 101, 7, 250, 64, 3, 99, 12}
			for i := range ids {
				ids[i] %= m.Arch.Vocab
			}
			if _, err := a.Forward(ids, false); err != nil {
				t.Fatal(err)
			}
			st, err := a.ExportState()
			if err != nil {
				t.Fatal(err)
			}
			want, _ := a.Forward([]int{9, 4}, true)

			c, _ := b.newSession(32)
			if err := c.ImportState(st); err != nil {
				t.Fatal(err)
			}
			if c.Len() != len(ids) {
				t.Fatalf("Len %d after import, want %d", c.Len(), len(ids))
			}
			got, _ := c.Forward([]int{9, 4}, true)
			if !slices.Equal(got, want) {
				t.Fatal("logits after import differ from the exporting session's")
			}

			bad := &backend.State{Pos: st.Pos, Layers: slices.Clone(st.Layers)}
			bad.Layers[0].K = bad.Layers[0].K[:0]
			bad.Layers[0].Conv = append(bad.Layers[0].Conv, 1)
			if err := c.ImportState(bad); err == nil {
				t.Fatal("malformed state imported")
			}
			short, _ := b.newSession(4)
			if err := short.ImportState(st); err == nil {
				t.Fatal("state longer than the session imported")
			}
		})
	}
}
