package server

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// browserWorker relays generations to a tab attached with ?role=worker:
// the server sends the tab "generate"/"load"/"cancel" messages with ids it
// chooses (job ids) and routes the tab's events back by id.
type browserWorker struct {
	id     string
	c      *wsConn
	nextJ  atomic.Int64
	active atomic.Int64

	mu      sync.Mutex
	name    string
	models  []string
	backend string
	jobs    map[string]chan *Msg
	gone    chan struct{}
	goneOne sync.Once
}

// relayQueue bounds the events buffered between the tab and the consumer
// of one job; a consumer that falls this far behind fails its job.
const relayQueue = 1024

// cancelGrace is how long a cancelled job waits for the tab's final event.
const cancelGrace = 5 * time.Second

func newBrowserWorker(id string, c *wsConn) *browserWorker {
	return &browserWorker{id: id, c: c, jobs: map[string]chan *Msg{}, gone: make(chan struct{})}
}

func (w *browserWorker) update(m *Msg) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if m.Name != "" {
		w.name = m.Name
	}
	if m.Models != nil {
		w.models = slices.Clone(m.Models)
	}
	if m.Backend != "" {
		w.backend = m.Backend
	}
}

func (w *browserWorker) info() WorkerInfo {
	w.mu.Lock()
	defer w.mu.Unlock()
	return WorkerInfo{ID: w.id, Kind: "browser", Name: w.name, Models: slices.Clone(w.models), Backend: w.backend,
		Active: int(w.active.Load())}
}

func (w *browserWorker) serves(model string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Contains(w.models, model)
}

func (w *browserWorker) close() error { return nil } // the connection closes it

// disconnect fails every job in flight.
func (w *browserWorker) disconnect() { w.goneOne.Do(func() { close(w.gone) }) }

// deliver routes a tab's event to its job. It runs on the tab's reader
// goroutine, the only sender on job channels, so it may close one.
func (w *browserWorker) deliver(m *Msg) {
	w.mu.Lock()
	ch, ok := w.jobs[m.ID]
	if !ok {
		w.mu.Unlock()
		return // a job that already ended (cancelled, failed): late events are dropped
	}
	select {
	case ch <- m:
	default:
		delete(w.jobs, m.ID)
		close(ch)
	}
	w.mu.Unlock()
}

func (w *browserWorker) startJob() (string, chan *Msg) {
	id := fmt.Sprintf("job-%d", w.nextJ.Add(1))
	ch := make(chan *Msg, relayQueue)
	w.mu.Lock()
	w.jobs[id] = ch
	w.mu.Unlock()
	return id, ch
}

func (w *browserWorker) endJob(id string) {
	w.mu.Lock()
	delete(w.jobs, id)
	w.mu.Unlock()
}

func workerErr(format string, args ...any) *apiError {
	return &apiError{Status: 502, Type: "server_error", Code: "worker_error", Message: fmt.Sprintf(format, args...)}
}

// silent is the error of a job the tab stopped answering.
func (w *browserWorker) silent(what string) *apiError {
	return &apiError{Status: http.StatusGatewayTimeout, Type: "server_error", Code: "worker_timeout",
		Message: fmt.Sprintf("worker %s sent nothing on the %s for %v: it was cancelled", w.id, what, w.c.s.cfg.WorkerTimeout)}
}

func (w *browserWorker) generate(ctx context.Context, req GenRequest, onToken func(Token) error) (*Result, error) {
	w.active.Add(1)
	defer w.active.Add(-1)
	jid, ch := w.startJob()
	defer w.endJob(jid)
	if err := w.c.sendMsg(generateMsg(jid, req)); err != nil {
		return nil, workerErr("worker %s: %v", w.id, err)
	}
	done := ctx.Done()
	var grace <-chan time.Time
	cancelTab := func() {
		w.c.sendMsg(&Msg{Type: "cancel", ID: jid})
	}
	// A tab that stops answering (hung, or never started) fails the job
	// after WorkerTimeout without an event, not never.
	idle := time.NewTimer(w.c.s.cfg.WorkerTimeout)
	defer idle.Stop()
	var got []int
	for {
		select {
		case m, ok := <-ch:
			if !ok {
				cancelTab()
				return nil, workerErr("worker %s: relay queue overflow", w.id)
			}
			idle.Reset(w.c.s.cfg.WorkerTimeout)
			switch m.Type {
			case "token":
				if m.TokenID == nil {
					cancelTab()
					return nil, workerErr("worker %s: token event without token_id", w.id)
				}
				if grace != nil {
					continue // cancelled: drain until done
				}
				got = append(got, *m.TokenID)
				if err := onToken(Token{ID: *m.TokenID, Text: m.Text}); err != nil {
					cancelTab()
					return nil, err
				}
			case "done":
				res := m.Result
				if res == nil {
					res = &Result{}
				}
				if res.IDs == nil {
					res.IDs = got
				}
				if grace != nil && (res.FinishReason == "" || res.FinishReason == "length") {
					res.FinishReason = "cancelled"
				}
				if res.Backend == "" {
					res.Backend = w.info().Backend
				}
				return res, nil
			case "error":
				msg := "unknown error"
				if m.Error != nil {
					msg = m.Error.Message
				}
				return nil, workerErr("worker %s: %s", w.id, msg)
			}
		case <-done:
			done = nil
			cancelTab()
			grace = time.After(cancelGrace)
		case <-grace:
			return &Result{IDs: got, FinishReason: "cancelled", Backend: w.info().Backend}, nil
		case <-idle.C:
			if grace != nil {
				continue // cancelled already: the grace bounds the wait
			}
			cancelTab()
			return nil, w.silent("generation")
		case <-w.gone:
			return nil, workerErr("worker %s disconnected", w.id)
		}
	}
}

func (w *browserWorker) load(ctx context.Context, model string, progress func(Progress)) (WorkerInfo, error) {
	if model == "" {
		return WorkerInfo{}, badRequest("model", "load: no model given")
	}
	jid, ch := w.startJob()
	defer w.endJob(jid)
	if err := w.c.sendMsg(&Msg{Type: "load", ID: jid, Model: model}); err != nil {
		return WorkerInfo{}, workerErr("worker %s: %v", w.id, err)
	}
	idle := time.NewTimer(w.c.s.cfg.WorkerTimeout)
	defer idle.Stop()
	for {
		select {
		case m, ok := <-ch:
			if !ok {
				return WorkerInfo{}, workerErr("worker %s: relay queue overflow", w.id)
			}
			idle.Reset(w.c.s.cfg.WorkerTimeout)
			switch m.Type {
			case "progress":
				if m.Progress != nil {
					progress(*m.Progress)
				}
			case "loaded":
				w.mu.Lock()
				switch {
				case m.Models != nil:
					w.models = slices.Clone(m.Models)
				case m.Info != nil && m.Info.Models != nil:
					w.models = slices.Clone(m.Info.Models)
				case !slices.Contains(w.models, model):
					w.models = append(w.models, model)
				}
				if m.Backend != "" {
					w.backend = m.Backend
				}
				w.mu.Unlock()
				return w.info(), nil
			case "error":
				msg := "unknown error"
				if m.Error != nil {
					msg = m.Error.Message
				}
				return WorkerInfo{}, workerErr("worker %s: load %q: %s", w.id, model, msg)
			}
		case <-idle.C:
			w.c.sendMsg(&Msg{Type: "cancel", ID: jid})
			return WorkerInfo{}, w.silent("load of " + model)
		case <-ctx.Done():
			w.c.sendMsg(&Msg{Type: "cancel", ID: jid})
			return WorkerInfo{}, ctx.Err()
		case <-w.gone:
			return WorkerInfo{}, workerErr("worker %s disconnected", w.id)
		}
	}
}
