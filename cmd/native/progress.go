package main

import (
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/cortiq/cortiq/engine"
)

// loadProgress tells the user what a slow load is doing. A device load can
// take many seconds (weight uploads, kernel builds) with nothing else to
// show: with --backend webgpu every stage is printed to stderr as it
// starts; otherwise stages are printed only once the load has taken over
// two seconds, so a quick load stays quiet. The time the load took
// follows when anything was printed.
type loadProgress struct {
	mu      sync.Mutex
	t0      time.Time
	current string
	printed bool
	ended   bool
	timer   *time.Timer
}

func newLoadProgress(verbose bool) *loadProgress {
	p := &loadProgress{t0: time.Now(), printed: verbose}
	if !verbose {
		p.timer = time.AfterFunc(2*time.Second, func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			if p.ended {
				return
			}
			p.printed = true
			if p.current != "" {
				fmt.Fprintf(os.Stderr, "cortiq: %s… (%.0f s so far)\n", p.current, time.Since(p.t0).Seconds())
			}
		})
	}
	return p
}

// stage is engine.Options.Progress.
func (p *loadProgress) stage(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.current = s
	if p.printed {
		fmt.Fprintf(os.Stderr, "cortiq: %s…\n", s)
	}
}

// done ends the report (e is nil when the load failed).
func (p *loadProgress) done(e *engine.Engine) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ended = true
	if p.timer != nil {
		p.timer.Stop()
	}
	if p.printed && e != nil {
		fmt.Fprintf(os.Stderr, "cortiq: loaded on %s in %.1f s\n", e.BackendName(), time.Since(p.t0).Seconds())
	}
}
