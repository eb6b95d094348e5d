package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// Client speaks the websocket protocol as a client (cortiq remote, tests).
// It is safe for concurrent use: calls are told apart by their ids.
type Client struct {
	ws    *websocket.Conn
	Hello Msg

	wmu  sync.Mutex // gorilla allows one concurrent writer
	next atomic.Int64

	mu      sync.Mutex
	pending map[string]chan *Msg
	err     error
	done    chan struct{}
}

// WebsocketURL turns a server address (http://host:port, ws://..., or
// host:port) into its /v1/ws URL.
func WebsocketURL(server string) (string, error) {
	if !strings.Contains(server, "://") {
		server = "http://" + server
	}
	u, err := url.Parse(server)
	if err != nil {
		return "", fmt.Errorf("server URL %q: %w", server, err)
	}
	switch u.Scheme {
	case "http", "ws":
		u.Scheme = "ws"
	case "https", "wss":
		u.Scheme = "wss"
	default:
		return "", fmt.Errorf("server URL %q: want http(s):// or ws(s)://", server)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/ws"
	}
	return u.String(), nil
}

// Dial connects to server and reads its hello. token, when set, is sent as
// a bearer header.
func Dial(ctx context.Context, server, token string) (*Client, error) {
	u, err := WebsocketURL(server)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	d := websocket.Dialer{HandshakeTimeout: 15 * time.Second}
	ws, resp, err := d.DialContext(ctx, u, h)
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("remote: %s: %s", u, resp.Status)
		}
		return nil, fmt.Errorf("remote: %s: %w", u, err)
	}
	ws.SetReadLimit(64 << 20)
	c := &Client{ws: ws, pending: map[string]chan *Msg{}, done: make(chan struct{})}
	ws.SetReadDeadline(time.Now().Add(15 * time.Second))
	_, data, err := ws.ReadMessage()
	if err != nil {
		ws.Close()
		return nil, fmt.Errorf("remote: %s: reading hello: %w", u, err)
	}
	ws.SetReadDeadline(time.Time{})
	if err := json.Unmarshal(data, &c.Hello); err != nil || c.Hello.Type != "hello" {
		ws.Close()
		return nil, fmt.Errorf("remote: %s: no hello from the server", u)
	}
	if c.Hello.Protocol != ProtocolVersion {
		ws.Close()
		return nil, fmt.Errorf("remote: %s: server speaks protocol %d, this client %d", u, c.Hello.Protocol, ProtocolVersion)
	}
	go c.readLoop()
	return c, nil
}

// Close closes the connection.
func (c *Client) Close() error {
	c.wmu.Lock()
	c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	c.wmu.Unlock()
	err := c.ws.Close()
	<-c.done
	return err
}

func (c *Client) readLoop() {
	defer close(c.done)
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			c.mu.Lock()
			c.err = fmt.Errorf("remote: connection lost: %w", err)
			for id, ch := range c.pending {
				close(ch)
				delete(c.pending, id)
			}
			c.mu.Unlock()
			return
		}
		var m Msg
		if json.Unmarshal(data, &m) != nil {
			continue
		}
		c.mu.Lock()
		ch := c.pending[m.ID]
		c.mu.Unlock()
		if ch == nil {
			continue
		}
		select {
		case ch <- &m:
		case <-time.After(30 * time.Second):
			// The consumer stopped reading: fail it rather than stall the
			// others sharing the connection.
			c.mu.Lock()
			if c.pending[m.ID] == ch {
				delete(c.pending, m.ID)
				close(ch)
			}
			c.mu.Unlock()
		}
	}
}

// Send writes one message as it is.
func (c *Client) Send(m *Msg) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.ws.SetWriteDeadline(time.Now().Add(15 * time.Second))
	return c.ws.WriteJSON(m)
}

func (c *Client) open(m *Msg) (chan *Msg, error) {
	if m.ID == "" {
		m.ID = fmt.Sprintf("c%d", c.next.Add(1))
	}
	ch := make(chan *Msg, 256)
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return nil, c.err
	}
	c.pending[m.ID] = ch
	c.mu.Unlock()
	if err := c.Send(m); err != nil {
		c.finish(m.ID)
		return nil, err
	}
	return ch, nil
}

func (c *Client) finish(id string) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

func (c *Client) connErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	return errors.New("remote: connection lost")
}

// RemoteError is an error event from the server.
type RemoteError struct{ ErrorBody }

func (e *RemoteError) Error() string { return fmt.Sprintf("remote: %s: %s", e.Code, e.Message) }

// call sends m and returns the first reply of type want.
func (c *Client) call(ctx context.Context, m *Msg, want string) (*Msg, error) {
	ch, err := c.open(m)
	if err != nil {
		return nil, err
	}
	defer c.finish(m.ID)
	for {
		select {
		case r, ok := <-ch:
			if !ok {
				return nil, c.connErr()
			}
			if r.Type == "error" && r.Error != nil {
				return nil, &RemoteError{*r.Error}
			}
			if r.Type == want {
				return r, nil
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Workers lists the server's workers.
func (c *Client) Workers(ctx context.Context) ([]WorkerInfo, error) {
	r, err := c.call(ctx, &Msg{Type: "workers"}, "workers")
	if err != nil {
		return nil, err
	}
	return r.Workers, nil
}

// Stats returns the server's statistics.
func (c *Client) Stats(ctx context.Context) (*Stats, error) {
	r, err := c.call(ctx, &Msg{Type: "stats"}, "stats")
	if err != nil {
		return nil, err
	}
	return r.Stats, nil
}

// Ping measures a round trip.
func (c *Client) Ping(ctx context.Context) (time.Duration, error) {
	t0 := time.Now()
	_, err := c.call(ctx, &Msg{Type: "ping", Time: t0.UnixMilli()}, "pong")
	return time.Since(t0), err
}

// Load asks the server (worker "") or a browser worker to load a model.
func (c *Client) Load(ctx context.Context, worker, model string, progress func(Progress)) (*WorkerInfo, error) {
	m := &Msg{Type: "load", Worker: worker, Model: model}
	ch, err := c.open(m)
	if err != nil {
		return nil, err
	}
	defer c.finish(m.ID)
	for {
		select {
		case r, ok := <-ch:
			if !ok {
				return nil, c.connErr()
			}
			switch r.Type {
			case "progress":
				if progress != nil && r.Progress != nil {
					progress(*r.Progress)
				}
			case "loaded":
				return r.Info, nil
			case "error":
				if r.Error != nil {
					return nil, &RemoteError{*r.Error}
				}
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Generate runs a generation described by m (Type and ID are filled in)
// and calls onToken as tokens arrive. Cancelling ctx sends "cancel" and
// waits for the final event.
func (c *Client) Generate(ctx context.Context, m *Msg, onToken func(Token) error) (*Result, error) {
	m.Type = "generate"
	ch, err := c.open(m)
	if err != nil {
		return nil, err
	}
	defer c.finish(m.ID)
	done := ctx.Done()
	for {
		select {
		case r, ok := <-ch:
			if !ok {
				return nil, c.connErr()
			}
			switch r.Type {
			case "token":
				if r.TokenID == nil {
					return nil, errors.New("remote: token event without token_id")
				}
				if onToken != nil {
					if err := onToken(Token{ID: *r.TokenID, Text: r.Text}); err != nil {
						c.Send(&Msg{Type: "cancel", ID: m.ID})
						return nil, err
					}
				}
			case "done":
				if r.Result == nil {
					return nil, errors.New("remote: done event without result")
				}
				return r.Result, nil
			case "error":
				if r.Error != nil {
					return nil, &RemoteError{*r.Error}
				}
				return nil, errors.New("remote: error event without error")
			}
		case <-done:
			done = nil
			if err := c.Send(&Msg{Type: "cancel", ID: m.ID}); err != nil {
				return nil, ctx.Err()
			}
		}
	}
}
