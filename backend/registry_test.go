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

func TestIdentify(t *testing.T) {
	Register("test-id", func(context.Context, *model.Model, Options) (Backend, error) { return nil, errors.New("opened") })
	if _, err := Identify(context.Background(), "test-id", &model.Model{}, Options{}); !errors.Is(err, ErrUnidentified) {
		t.Fatalf("Identify without an identifier: %v, want ErrUnidentified", err)
	}
	var got Options
	RegisterIdentifier("test-id", func(_ context.Context, _ *model.Model, o Options) (string, error) {
		got = o
		return "test-id:dev0", nil
	})
	if n, err := Identify(context.Background(), "test-id", &model.Model{}, Options{AllowSoftware: true}); err != nil || n != "test-id:dev0" || !got.AllowSoftware {
		t.Fatalf("Identify = %q, %v (saw %+v)", n, err, got)
	}
	if _, err := Identify(context.Background(), "test-none", &model.Model{}, Options{}); err == nil || !strings.Contains(err.Error(), "test-none") {
		t.Errorf("Identify of an unknown name: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Identify(ctx, "test-id", &model.Model{}, Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Identify with a cancelled context: %v", err)
	}
	for _, c := range []struct {
		name string
		id   Identifier
	}{
		{"test-id", func(context.Context, *model.Model, Options) (string, error) { return "", nil }},   // twice
		{"test-none", func(context.Context, *model.Model, Options) (string, error) { return "", nil }}, // not registered
		{"test-a", nil},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("RegisterIdentifier(%q) did not panic", c.name)
				}
			}()
			RegisterIdentifier(c.name, c.id)
		}()
	}
}
