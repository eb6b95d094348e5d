package server

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// trickle writes one byte of filler every 50 ms until the connection
// fails or stop is closed.
func trickle(c net.Conn, stop chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-time.After(50 * time.Millisecond):
		}
		c.SetWriteDeadline(time.Now().Add(time.Second))
		if _, err := c.Write([]byte(" ")); err != nil {
			return
		}
	}
}

// readToEOF reads the whole answer the server gives before it closes the
// connection (a generous bound: the server's own deadlines are far
// shorter). A reset (the server closed with our bytes unread) is a close.
func readToEOF(t *testing.T, c net.Conn) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	b, err := io.ReadAll(c)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the server did not close a trickling connection: %v (read %q)", err, b)
	}
	return string(b)
}

// TestSlowBodyCutOff: a body trickled a byte at a time is cut off at the
// body deadline (408 with the token, the 401's connection closed
// without), while a streamed answer longer than that deadline is not.
func TestSlowBodyCutOff(t *testing.T) {
	fm := &fakeModel{delay: 100 * time.Millisecond}
	ts := startServer(t, Config{Token: "tok", BodyTimeout: 500 * time.Millisecond}, map[string]Model{"m": fm})
	for _, c := range []struct {
		auth, path, want string
	}{
		{"Authorization: Bearer tok\r\n", "/v1/completions", "HTTP/1.1 408"},
		{"", "/v1/completions", "HTTP/1.1 401"},
		{"", "/healthz", "HTTP/1.1 200"}, // a handler that ignores the body: net/http's drain is bounded too
	} {
		conn, err := net.Dial("tcp", ts.Addr)
		if err != nil {
			t.Fatal(err)
		}
		method := "POST"
		if c.path == "/healthz" {
			method = "GET"
		}
		fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: %s\r\n%sContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{", method, c.path, ts.Addr, c.auth)
		stop := make(chan struct{})
		go trickle(conn, stop)
		got := readToEOF(t, conn)
		close(stop)
		conn.Close()
		if !strings.HasPrefix(got, c.want) {
			t.Errorf("%s %s (auth %v) with a trickled body: %q, want %s then a close", method, c.path, c.auth != "", got, c.want)
		}
	}
	if n := fm.calls.Load(); n != 0 {
		t.Errorf("a trickled request ran %d generations", n)
	}
	// The deadline covers the body only: a stream longer than it runs to
	// its end.
	text, _, _ := streamTextAuth(t, ts.URL+"/v1/completions", "tok", `{"prompt":"x","max_tokens":10,"stream":true}`)
	if strings.Count(text, "t") != 10 {
		t.Errorf("a 1 s stream behind a 0.5 s body deadline: %q, want 10 tokens", text)
	}
}

// streamTextAuth posts a streaming completion and returns the text of its
// chunks.
func streamTextAuth(t *testing.T, url, token, body string) (string, int, error) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var text strings.Builder
	for _, ev := range sseEvents(t, resp.Body) {
		if ev == "[DONE]" {
			break
		}
		var c struct {
			Choices []struct{ Text string }
		}
		jsonUnmarshal(t, []byte(ev), &c)
		for _, ch := range c.Choices {
			text.WriteString(ch.Text)
		}
	}
	return text.String(), resp.StatusCode, nil
}

// TestPreAuthConnectionCap: trickling unauthenticated connections cannot
// exhaust the server: past the per-address bound new ones are refused
// with 503 at once, other addresses and authenticated connections are
// still served, and the server closes the tricklers itself (header
// deadline), which frees their places.
func TestPreAuthConnectionCap(t *testing.T) {
	ts := startServer(t, Config{Token: "tok", MaxPreAuth: 6, MaxPreAuthPerIP: 3, HeaderTimeout: 3 * time.Second},
		map[string]Model{"m": &fakeModel{}})
	// An authenticated keep-alive connection does not count.
	authed := &http.Client{Transport: &http.Transport{}}
	defer authed.CloseIdleConnections()
	req, _ := http.NewRequest("GET", ts.URL+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := authed.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("authenticated request: %v %v", err, resp)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	waitFor(t, "the authenticated connection to leave the count", func() bool { return ts.preAuth.preAuth() == 0 })

	const n = 10
	conns := make([]net.Conn, n)
	for i := range conns {
		c, err := net.Dial("tcp", ts.Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "GET /v1/models HTTP/1.1\r\nHost: %s\r\nX-Slow: ", ts.Addr) // headers never end
		conns[i] = c
	}
	waitFor(t, "the extra connections to be refused", func() bool { return ts.metrics.connsRefused.Load() == n-3 })
	if got := ts.preAuth.preAuth(); got != 3 {
		t.Errorf("%d unauthenticated connections held, want the per-address bound 3", got)
	}
	var wg sync.WaitGroup
	answers := make([]string, n)
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.SetReadDeadline(time.Now().Add(20 * time.Second))
			line, _ := bufio.NewReader(c).ReadString('\n')
			answers[i] = line
		}()
	}
	// Another address is still served while 127.0.0.1 is at its bound.
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	if c, err := d.Dial("tcp", ts.Addr); err != nil {
		t.Logf("no second loopback address (127.0.0.2): %v; skipping that part", err)
	} else {
		fmt.Fprintf(c, "GET /v1/models HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer tok\r\nConnection: close\r\n\r\n", ts.Addr)
		got := readToEOF(t, c)
		c.Close()
		if !strings.HasPrefix(got, "HTTP/1.1 200") {
			t.Errorf("request from 127.0.0.2 while 127.0.0.1 is at its bound: %q", got)
		}
	}
	// The server closes the tricklers at the header deadline.
	wg.Wait()
	refused := 0
	for _, a := range answers {
		if strings.HasPrefix(a, "HTTP/1.1 503") {
			refused++
		} else if a != "" && !strings.HasPrefix(a, "HTTP/1.1 408") {
			t.Errorf("a trickling connection got %q", a)
		}
	}
	if refused != n-3 {
		t.Errorf("%d connections refused with 503, want %d", refused, n-3)
	}
	waitFor(t, "the tricklers' places to be freed", func() bool { return ts.preAuth.preAuth() == 0 })
	resp, err = authed.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("authenticated request after the tricklers: %v %v", err, resp)
	}
	resp.Body.Close()
	// An unauthenticated answer closes its connection.
	resp, err = httpClient.Get(ts.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if !resp.Close {
		t.Errorf("an unauthenticated request left its connection open for keep-alive")
	}
}

// TestPreAuthTimeout: a connection that has not authenticated within
// PreAuthTimeout is closed whatever it is doing (here: headers that never
// end, under a longer header deadline); an authenticated one stays.
func TestPreAuthTimeout(t *testing.T) {
	ts := startServer(t, Config{Token: "tok", PreAuthTimeout: 500 * time.Millisecond, HeaderTimeout: time.Minute},
		map[string]Model{"m": &fakeModel{}})
	c, err := net.Dial("tcp", ts.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /v1/models HTTP/1.1\r\nHost: %s\r\nX-Slow: ", ts.Addr)
	stop := make(chan struct{})
	go trickle(c, stop)
	readToEOF(t, c)
	close(stop)
	waitFor(t, "the closed connection to leave the count", func() bool { return ts.preAuth.preAuth() == 0 })

	// An authenticated keep-alive connection outlives the pre-auth timeout.
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	get := func() bool {
		reused := false
		req, _ := http.NewRequest("GET", ts.URL+"/v1/models", nil)
		req.Header.Set("Authorization", "Bearer tok")
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused },
		}))
		resp, err := client.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("authenticated request: %v %v", err, resp)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return reused
	}
	get()
	time.Sleep(time.Second) // past the pre-auth timeout
	if !get() {
		t.Errorf("an authenticated keep-alive connection was closed by the pre-auth timeout")
	}
}
