package backend

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/cortiq/cortiq/model"
)

func TestRegistry(t *testing.T) {
	var got Options
	errNo := errors.New("no device here")
	Register("test-a", func(ctx context.Context, m *model.Model, o Options) (Backend, error) {
		got = o
		return nil, errNo
	})
	if !slices.Contains(Names(), "test-a") || !slices.IsSorted(Names()) {
		t.Fatalf("Names() = %v, want test-a among sorted names", Names())
	}
	if _, err := Open(context.Background(), "test-a", &model.Model{}, Options{Layers: "0-3", KVF16: true}); !errors.Is(err, errNo) {
		t.Fatalf("Open: %v, want the opener's error", err)
	}
	if got.Layers != "0-3" || !got.KVF16 {
		t.Errorf("the opener saw %+v", got)
	}
	if _, err := Open(context.Background(), "test-none", &model.Model{}, Options{}); err == nil || !strings.Contains(err.Error(), "test-none") {
		t.Errorf("Open of an unknown name: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Open(ctx, "test-a", &model.Model{}, Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Open with a cancelled context: %v", err)
	}
	for _, c := range []struct {
		name string
		open Opener
	}{{"test-a", func(context.Context, *model.Model, Options) (Backend, error) { return nil, nil }}, {"test-b", nil}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q, nil=%v) did not panic", c.name, c.open == nil)
				}
			}()
			Register(c.name, c.open)
		}()
	}
}
