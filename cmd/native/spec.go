package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/cortiq/cortiq/backend"
	"github.com/cortiq/cortiq/engine"
)

// specFlags are the speculative-decoding flags of run and serve.
type specFlags struct {
	mode, draft string
	k           int
	always      bool
}

func (f *specFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.mode, "spec", "", "speculative decoding: ngram (prompt lookup, no second model); --draft implies draft")
	fs.StringVar(&f.draft, "draft", "", "draft model for speculative decoding (same vocabulary as -m): a path or a name")
	fs.IntVar(&f.k, "draft-k", engine.DefaultSpecK, "tokens drafted per speculative step (1..16)")
	fs.BoolVar(&f.always, "spec-always", false, "speculate at every step (by default drafting pauses while it measures slower than plain decoding)")
}

// prepare validates the flags and sizes the sessions' rewind depth before
// the target loads.
func (f *specFlags) prepare(mf *modelFlags) error {
	switch {
	case f.mode == "" && f.draft == "":
		if f.always {
			return errors.New("--spec-always without --spec ngram or --draft MODEL")
		}
		return nil
	case f.mode == "ngram" && f.draft != "":
		return errors.New("--spec ngram and --draft exclude each other")
	case f.mode == "" || f.mode == "draft":
		if f.draft == "" {
			return errors.New("--spec draft needs --draft MODEL")
		}
		f.mode = "draft"
	case f.mode != "ngram":
		return fmt.Errorf("--spec %q: want ngram (or --draft MODEL)", f.mode)
	}
	if f.k < 1 || f.k > 16 {
		return fmt.Errorf("--draft-k %d: want 1..16", f.k)
	}
	mf.rewindDepth = max(f.k, backend.DefaultRewindDepth)
	return nil
}

// attach loads the draft (with the target's backend flags) and makes the
// speculation e's default. The returned func closes the draft.
func (f *specFlags) attach(ctx context.Context, mf modelFlags, e *engine.Engine) (func(), error) {
	if f.mode == "" {
		return func() {}, nil
	}
	sp := &engine.Spec{Mode: f.mode, K: f.k, Always: f.always}
	closeDraft := func() {}
	if f.mode == "draft" {
		dm := mf
		dm.model = f.draft
		d, err := dm.load(ctx)
		if err != nil {
			return nil, fmt.Errorf("--draft: %w", err)
		}
		sp.Draft = d
		closeDraft = func() { d.Close() }
	}
	if err := e.SetSpec(sp); err != nil {
		closeDraft()
		return nil, fmt.Errorf("--draft %s: %w", f.draft, err)
	}
	return closeDraft, nil
}
