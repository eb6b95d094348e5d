package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Version is reported in hello; the command sets it.
var Version = "dev"

// wsConn is one websocket connection, client or worker. Messages to the
// peer go through a bounded queue drained by one writer goroutine, so
// generations sharing the connection never block on the network: when the
// queue is full the peer is too slow and the connection is dropped, which
// cancels its generations.
type wsConn struct {
	s    *Server
	ws   *websocket.Conn
	role string // "client" or "worker"

	send         chan []byte
	graceful     chan struct{} // closed: flush the queue, say goodbye, stop
	gracefulOnce sync.Once
	closeCode    int    // the goodbye's close code and reason: the first closeGracefully's
	closeReason  string // (under mu)
	ctx          context.Context
	cancel       context.CancelCauseFunc
	closeOnce    sync.Once
	writerDone   chan struct{}

	mu     sync.Mutex
	authed bool
	onAuth func()                        // takes the connection out of the pre-auth count
	gens   map[string]context.CancelFunc // client generations by id
	wg     sync.WaitGroup                // generation and load goroutines

	worker *browserWorker // set once a worker registers
}

func (s *Server) handleWS(w http.ResponseWriter, r *http.Request) {
	if s.draining.Load() {
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	}
	if !s.originAllowed(r) {
		http.Error(w, "origin not allowed", http.StatusForbidden)
		return
	}
	authed := s.cfg.Token == ""
	if t, ok := bearer(r); ok {
		if !s.tokenOK(t) {
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		authed = true
	}
	role := r.URL.Query().Get("role")
	switch role {
	case "", "client":
		role = "client"
	case "worker":
	default:
		http.Error(w, fmt.Sprintf("unknown role %q: want client or worker", role), http.StatusBadRequest)
		return
	}
	up := websocket.Upgrader{
		ReadBufferSize:  4096,
		WriteBufferSize: 4096,
		CheckOrigin:     s.originAllowed,
	}
	ws, err := up.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader has answered
	}
	ws.SetReadLimit(s.cfg.MaxMessageBytes)
	c := &wsConn{
		s: s, ws: ws, role: role, authed: authed,
		send:       make(chan []byte, s.cfg.SendQueue),
		graceful:   make(chan struct{}),
		writerDone: make(chan struct{}),
		gens:       map[string]context.CancelFunc{},
		onAuth:     func() { connAuthenticated(r) },
	}
	c.ctx, c.cancel = context.WithCancelCause(context.Background())
	s.mu.Lock()
	if s.draining.Load() {
		s.mu.Unlock()
		ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseGoingAway, "shutting down"), time.Now().Add(time.Second))
		ws.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.connWG.Add(1)
	s.mu.Unlock()
	s.metrics.wsConns.Add(1)
	defer func() {
		s.metrics.wsConns.Add(-1)
		s.connWG.Done()
	}()

	go c.writeLoop()
	c.sendMsg(&Msg{Type: "hello", Protocol: ProtocolVersion, Role: role, AuthRequired: !authed, Server: &ServerInfo{
		Name: "cortiq", Version: Version, Protocols: []int{ProtocolVersion}, Models: s.modelNames(),
	}})
	c.readLoop()
	c.close(nil)
	<-c.writerDone
	c.wg.Wait()
}

func (s *Server) modelNames() []string {
	seen := map[string]bool{}
	names := []string{}
	for _, w := range s.Workers() {
		for _, m := range w.Models {
			if !seen[m] {
				seen[m] = true
				names = append(names, m)
			}
		}
	}
	return names
}

// sendMsg queues m; it fails, and drops the connection, when the queue is
// full.
func (c *wsConn) sendMsg(m *Msg) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if c.ctx.Err() != nil {
		return context.Cause(c.ctx)
	}
	select {
	case c.send <- b:
		return nil
	default:
		c.s.metrics.wsDropped.Add(1)
		c.s.cfg.Logf("server: websocket %s: dropping a client that does not read (%d messages queued)", c.ws.RemoteAddr(), cap(c.send))
		c.close(errSlow)
		return errSlow
	}
}

// close ends the connection at once: its generations are cancelled and,
// for a worker, its relayed jobs fail.
func (c *wsConn) close(cause error) {
	c.closeOnce.Do(func() {
		if cause == nil {
			cause = errors.New("connection closed")
		}
		c.cancel(cause)
		c.ws.Close()
		c.s.mu.Lock()
		delete(c.s.conns, c)
		c.s.mu.Unlock()
		if c.worker != nil {
			c.s.removeWorker(c.worker)
			c.worker.disconnect()
		}
	})
}

// closeGracefully lets the connection's generations deliver their final
// events, then flushes the queue and sends a close frame with code and
// reason (the first call's, when called again).
func (c *wsConn) closeGracefully(code int, reason string) {
	c.mu.Lock()
	if c.closeCode == 0 {
		c.closeCode, c.closeReason = code, reason
	}
	c.mu.Unlock()
	go func() {
		done := make(chan struct{})
		go func() { c.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
		case <-c.ctx.Done():
		}
		c.gracefulOnce.Do(func() { close(c.graceful) })
	}()
}

func (c *wsConn) writeLoop() {
	defer close(c.writerDone)
	ping := time.NewTicker(c.s.cfg.PingInterval)
	defer ping.Stop()
	write := func(b []byte) bool {
		c.ws.SetWriteDeadline(time.Now().Add(c.s.cfg.WriteTimeout))
		if err := c.ws.WriteMessage(websocket.TextMessage, b); err != nil {
			c.close(fmt.Errorf("write: %w", err))
			return false
		}
		return true
	}
	for {
		select {
		case b := <-c.send:
			if !write(b) {
				return
			}
		case <-ping.C:
			if err := c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(c.s.cfg.WriteTimeout)); err != nil {
				c.close(fmt.Errorf("ping: %w", err))
				return
			}
		case <-c.graceful:
			for {
				select {
				case b := <-c.send:
					if !write(b) {
						return
					}
					continue
				default:
				}
				break
			}
			c.mu.Lock()
			code, reason := c.closeCode, c.closeReason
			c.mu.Unlock()
			c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(time.Second))
			// Let the peer answer the close (so nothing it sent is left
			// unread, which would reset the connection under our last
			// messages), but not for long.
			c.ws.SetReadDeadline(time.Now().Add(2 * time.Second))
			return
		case <-c.ctx.Done():
			return
		}
	}
}

func (c *wsConn) readLoop() {
	s := c.s
	idle := 2*s.cfg.PingInterval + 10*time.Second
	c.ws.SetPongHandler(func(string) error {
		c.ws.SetReadDeadline(time.Now().Add(idle))
		return nil
	})
	c.mu.Lock()
	authed := c.authed
	c.mu.Unlock()
	if authed {
		c.ws.SetReadDeadline(time.Now().Add(idle))
	} else {
		c.ws.SetReadDeadline(time.Now().Add(s.cfg.AuthTimeout))
	}
	for {
		mt, data, err := c.ws.ReadMessage()
		if err != nil {
			if errors.Is(err, websocket.ErrReadLimit) {
				s.metrics.wsDropped.Add(1)
				s.cfg.Logf("server: websocket %s: message over %d bytes: connection closed", c.ws.RemoteAddr(), s.cfg.MaxMessageBytes)
			}
			return
		}
		select {
		case <-c.graceful:
			continue // shutting down: read only to see the peer's close
		default:
		}
		if c.authed {
			c.ws.SetReadDeadline(time.Now().Add(idle))
		}
		if mt != websocket.TextMessage {
			c.sendMsg(errMsg("", "bad_message", "binary messages are not part of the protocol"))
			continue
		}
		m, err := DecodeMsg(data)
		if err != nil {
			c.sendMsg(errMsg("", "bad_message", "%v", err))
			continue
		}
		if !c.authed {
			switch m.Type {
			case "auth":
				if s.cfg.Token == "" || s.tokenOK(m.Token) {
					c.mu.Lock()
					c.authed = true
					c.mu.Unlock()
					c.onAuth()
					c.ws.SetReadDeadline(time.Now().Add(idle))
					c.sendMsg(&Msg{Type: "auth_ok", ID: m.ID})
					continue
				}
				fallthrough
			default:
				c.s.metrics.wsDropped.Add(1)
				c.sendMsg(errMsg(m.ID, "unauthorized", "authenticate first with a correct token: {\"type\":\"auth\",\"token\":...}"))
				c.closeGracefully(websocket.ClosePolicyViolation, "unauthorized: authentication failed")
				<-c.writerDone
				return
			}
		}
		c.dispatch(m)
	}
}

func (c *wsConn) dispatch(m *Msg) {
	s := c.s
	switch m.Type {
	case "auth":
		c.sendMsg(&Msg{Type: "auth_ok", ID: m.ID})
	case "ping":
		c.sendMsg(&Msg{Type: "pong", ID: m.ID, Time: time.Now().UnixMilli()})
	case "pong":
	case "workers":
		c.sendMsg(&Msg{Type: "workers", ID: m.ID, Workers: s.Workers()})
	case "stats":
		c.sendMsg(&Msg{Type: "stats", ID: m.ID, Stats: s.stats()})
	case "generate":
		c.generate(m)
	case "imagine":
		c.imagine(m)
	case "cancel":
		c.mu.Lock()
		cancel, ok := c.gens[m.ID]
		c.mu.Unlock()
		if !ok {
			c.sendMsg(errMsg(m.ID, "not_found", "no generation %q on this connection", m.ID))
			return
		}
		cancel()
	case "load":
		c.load(m)
	case "register":
		c.register(m)
	case "token", "done", "error", "progress", "loaded":
		if c.worker == nil {
			c.sendMsg(errMsg(m.ID, "bad_message", "%q is a worker's event: register first (connect with ?role=worker)", m.Type))
			return
		}
		c.worker.deliver(m)
	default:
		c.sendMsg(errMsg(m.ID, "unknown_type", "unknown message type %q", m.Type))
	}
}

func (s *Server) stats() *Stats {
	return &Stats{
		UptimeS: time.Since(s.started).Seconds(), Active: s.active.Load(),
		TokensGenerated: s.metrics.tokens.Load(), PromptTokens: s.metrics.promptTokens.Load(),
		Connections: s.metrics.wsConns.Load(), Workers: s.Workers(),
	}
}

func (c *wsConn) generate(m *Msg) {
	if m.ID == "" {
		c.sendMsg(errMsg("", "bad_message", "generate needs an id"))
		return
	}
	if m.Prompt == "" && m.IDs == nil && m.Messages == nil {
		c.sendMsg(errMsg(m.ID, "bad_message", "generate needs prompt, ids or messages"))
		return
	}
	req := m.genRequest()
	if aerr := validateGen(&req); aerr != nil {
		c.sendMsg(errMsgFrom(m.ID, aerr))
		return
	}
	w, aerr := c.s.pick(m.Worker, m.Model)
	if aerr != nil {
		c.sendMsg(errMsgFrom(m.ID, aerr))
		return
	}
	c.mu.Lock()
	if _, dup := c.gens[m.ID]; dup {
		c.mu.Unlock()
		c.sendMsg(errMsg(m.ID, "duplicate_id", "a generation with id %q is already running on this connection", m.ID))
		return
	}
	if len(c.gens) >= c.s.cfg.MaxPerConn {
		c.mu.Unlock()
		c.sendMsg(errMsg(m.ID, "rate_limit_exceeded", "at most %d concurrent generations per connection", c.s.cfg.MaxPerConn))
		return
	}
	gctx, cancel := context.WithCancel(c.ctx)
	c.gens[m.ID] = cancel
	c.wg.Add(1)
	c.mu.Unlock()
	id := m.ID
	go func() {
		defer c.wg.Done()
		defer func() {
			c.mu.Lock()
			delete(c.gens, id)
			c.mu.Unlock()
			cancel()
		}()
		res, err := c.s.run(gctx, w, req, func(t Token) error {
			tid := t.ID
			return c.sendMsg(&Msg{Type: "token", ID: id, TokenID: &tid, Text: t.Text})
		})
		if err != nil {
			c.sendMsg(errMsgFrom(id, err))
			return
		}
		c.sendMsg(&Msg{Type: "done", ID: id, Result: res})
	}()
}

func (c *wsConn) load(m *Msg) {
	if m.ID == "" {
		c.sendMsg(errMsg("", "bad_message", "load needs an id"))
		return
	}
	var target worker
	if m.Worker != "" {
		w, aerr := c.s.pick(m.Worker, "")
		if aerr != nil {
			c.sendMsg(errMsgFrom(m.ID, aerr))
			return
		}
		target = w
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		progress := func(p Progress) { c.sendMsg(&Msg{Type: "progress", ID: m.ID, Progress: &p}) }
		var info WorkerInfo
		var err error
		if target != nil {
			info, err = target.load(c.ctx, m.Model, progress)
		} else {
			info, err = c.s.loadNative(c.ctx, m.Model, progress)
		}
		if err != nil {
			c.sendMsg(errMsgFrom(m.ID, err))
			return
		}
		c.sendMsg(&Msg{Type: "loaded", ID: m.ID, Info: &info})
	}()
}

func (c *wsConn) register(m *Msg) {
	if c.role != "worker" {
		c.sendMsg(errMsg(m.ID, "bad_message", "only a worker connection (?role=worker) may register"))
		return
	}
	if c.worker == nil {
		c.worker = newBrowserWorker(c.s.newWorkerID("browser"), c)
		c.worker.update(m)
		c.s.addWorker(c.worker)
	} else {
		c.worker.update(m)
	}
	info := c.worker.info()
	c.sendMsg(&Msg{Type: "registered", ID: m.ID, Worker: info.ID, Info: &info})
}
