package server

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// connLimiter bounds the connections that have not authenticated yet, in
// all and per remote address, so that clients without the token cannot
// hold the server's sockets: past a bound a new connection is answered
// 503 and closed. A connection leaves the count when a request on it
// passes the token check (on a tokenless server: when its first request
// arrives), or when it closes. Until then every phase of it is bounded in
// time: headers (ReadHeaderTimeout), a body (BodyTimeout), the websocket
// auth message (AuthTimeout), a request without a valid token gets its
// answer with Connection: close, and whatever it is doing (a static file
// read slowly) the connection is closed after timeout.
type connLimiter struct {
	total, perIP int
	timeout      time.Duration
	m            *metrics

	mu   sync.Mutex
	n    int
	byIP map[string]int
}

func newConnLimiter(total, perIP int, timeout time.Duration, m *metrics) *connLimiter {
	return &connLimiter{total: total, perIP: perIP, timeout: timeout, m: m, byIP: map[string]int{}}
}

func (l *connLimiter) admit(ip string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n >= l.total || l.byIP[ip] >= l.perIP {
		return false
	}
	l.n++
	l.byIP[ip]++
	return true
}

func (l *connLimiter) release(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n--
	if l.byIP[ip]--; l.byIP[ip] <= 0 {
		delete(l.byIP, ip)
	}
}

// preAuth is the number of connections not yet authenticated.
func (l *connLimiter) preAuth() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

type limitListener struct {
	net.Listener
	lim *connLimiter
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := remoteIP(c.RemoteAddr())
		if l.lim.admit(ip) {
			tc := &trackedConn{Conn: c, lim: l.lim, ip: ip}
			tc.mu.Lock()
			tc.timer = time.AfterFunc(l.lim.timeout, func() {
				if !tc.authed.Load() {
					tc.Close()
				}
			})
			tc.mu.Unlock()
			return tc, nil
		}
		l.lim.m.connsRefused.Add(1)
		go func() {
			c.SetWriteDeadline(time.Now().Add(time.Second))
			const msg = "too many unauthenticated connections\n"
			fmt.Fprintf(c, "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s", len(msg), msg)
			c.Close()
		}()
	}
}

func remoteIP(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// trackedConn is a connection the limiter counts until it authenticates.
type trackedConn struct {
	net.Conn
	lim    *connLimiter
	ip     string
	mu     sync.Mutex
	timer  *time.Timer // closes the connection if it has not authenticated in time (under mu)
	authed atomic.Bool
	once   sync.Once
}

// authenticated takes the connection out of the limiter's count and off
// its timer.
func (c *trackedConn) authenticated() {
	c.authed.Store(true)
	c.leave()
}

func (c *trackedConn) leave() {
	c.once.Do(func() {
		c.mu.Lock()
		c.timer.Stop()
		c.mu.Unlock()
		c.lim.release(c.ip)
	})
}

func (c *trackedConn) Close() error {
	c.leave()
	return c.Conn.Close()
}

type connKey struct{}

// connAuthenticated marks the connection r came on as authenticated (a
// no-op for a request that did not come through Serve's listener).
func connAuthenticated(r *http.Request) {
	if tc, ok := r.Context().Value(connKey{}).(*trackedConn); ok {
		tc.authenticated()
	}
}

func withConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}
