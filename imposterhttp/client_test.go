package imposterhttp

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A proxy sends the client's headers upstream in the client's case and
// order (Host, named "host", where the client had it; Connection added
// last), and records and relays the upstream's answer with its headers
// as the upstream wrote them, as mountebank does.
func TestProxyKeepsHeaderNamesAndOrder(t *testing.T) {
	base, _ := admin(t)
	up := create(t, base, `{"protocol":"http","recordRequests":true,"stubs":[{"responses":[{"is":{
		"headers":{"x-lower-up":"v","X-Up":"1","set-cookie":["a=1","b=2"]},"body":"up"}}]}]}`)
	proxy := create(t, base, fmt.Sprintf(`{"protocol":"http","stubs":[{"responses":[{"proxy":{"to":"http://127.0.0.1:%d","mode":"proxyAlways"}}]}]}`, up))

	got := raw(t, proxy, "POST /p HTTP/1.1\r\nx-client: c1\r\nHost: somewhere\r\naccept: */*\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")
	head, body, _ := strings.Cut(got, "\r\n\r\n")
	require.Equal(t, "2\r\nup\r\n0\r\n\r\n", body, "chunked, as the upstream (a node server) sent it")
	lines := strings.Split(head, "\r\n")
	require.Equal(t, []string{"HTTP/1.1 200 OK", "x-lower-up: v", "X-Up: 1", "set-cookie: a=1", "set-cookie: b=2", "Connection: close"}, lines[:6],
		"the upstream's answer to a client that said close")

	recorded := do(t, "GET", fmt.Sprintf("%s/imposters/%d", base, up), "").body
	require.Contains(t, recorded, fmt.Sprintf(`"headers": {
        "x-client": "c1",
        "host": "127.0.0.1:%d",
        "accept": "*/*",
        "Content-Type": "text/plain",
        "Content-Length": "5",
        "Connection": "close"
      }`, up), "the upstream got the client's headers as sent")

	stubs := do(t, "GET", fmt.Sprintf("%s/imposters/%d", base, proxy), "").body
	require.Contains(t, stubs, `"headers": {
              "x-lower-up": "v",
              "X-Up": "1",
              "set-cookie": [
                "a=1",
                "b=2"
              ],
              "Connection": "close",
              "Date": `, "the recording keeps the upstream's names, order and repeats")
}

// scriptedServer is a TCP server on loopback that answers each connection with
// serve, and counts the connections.
type scriptedServer struct {
	ln    net.Listener
	conns atomic.Int32
}

func newScript(t *testing.T, serve func(c net.Conn, br *bufio.Reader)) *scriptedServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &scriptedServer{ln: ln}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range open {
			_ = c.Close() // the server's ends of connections a client keeps
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.conns.Add(1)
			mu.Lock()
			open = append(open, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				serve(c, bufio.NewReader(c))
			}()
		}
	}()
	return s
}

func (s *scriptedServer) addr() string { return s.ln.Addr().String() }

// answerEach reads requests off the connection and writes resp to each,
// until the client closes or after max requests (then it closes).
func answerEach(resp string, max int) func(net.Conn, *bufio.Reader) {
	return func(c net.Conn, br *bufio.Reader) {
		for range max {
			if _, err := readRequest(br, nil); err != nil {
				return
			}
			if _, err := io.WriteString(c, resp); err != nil {
				return
			}
		}
	}
}

func get(path string) *outRequest {
	return &outRequest{method: "GET", target: path, headers: [][2]string{{"Host", "x"}}}
}

// The answers' framings: Content-Length, chunked with trailers, to the
// close, none for HEAD and 204; interim answers are skipped.
func TestRawClientReadsEachFraming(t *testing.T) {
	cases := []struct {
		name, resp, method, body string
		status                   int
		keepAlive                bool
	}{
		{"length", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc", "GET", "abc", 200, true},
		{"chunked", "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n1;x=y\r\nc\r\n0\r\nX-Trailer: t\r\n\r\n", "GET", "abc", 201, true},
		{"to the close", "HTTP/1.1 200 OK\r\n\r\nabc", "GET", "abc", 200, false},
		{"http/1.0", "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\na", "GET", "a", 200, false},
		{"close", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\na", "GET", "a", 200, false},
		{"head", "HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n", "HEAD", "", 200, true},
		{"no content", "HTTP/1.1 204 No Content\r\n\r\n", "DELETE", "", 204, true},
		{"interim first", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", "POST", "ok", 200, true},
		{"coding not chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 1\r\n\r\nabc", "GET", "abc", 200, false},
		{"chunked over length", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", "GET", "abc", 200, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			perConn := 1 // an answer read to the close needs the close
			if tc.keepAlive {
				perConn = 2
			}
			s := newScript(t, answerEach(tc.resp, perConn))
			br := bufio.NewReader(strings.NewReader(tc.resp))
			resp, err := readResponse(br, tc.method)
			for err == nil && resp.status == 100 {
				resp, err = readResponse(br, tc.method)
			}
			require.NoError(t, err)
			require.Equal(t, tc.status, resp.status)
			require.Equal(t, tc.body, string(resp.body))
			require.Equal(t, tc.keepAlive, resp.keepAlive)

			// Twice through the client: a kept connection serves both.
			rc := newRawClient(4, 5*time.Second)
			req := get("/")
			req.method = tc.method
			for range 2 {
				resp, err = rc.do(context.Background(), "http", s.addr(), req)
				require.NoError(t, err)
				require.Equal(t, tc.status, resp.status)
				require.Equal(t, tc.body, string(resp.body))
			}
			conns := int32(2)
			if tc.keepAlive {
				conns = 1
			}
			require.Equal(t, conns, s.conns.Load())
		})
	}
}

// Answers the client cannot take are errors, never a short or wrong body.
func TestRawClientRefusesBadAnswers(t *testing.T) {
	cases := map[string]string{
		"status line":    "HTTP/1.1 OK\r\n\r\n",
		"not http":       "SSH-2.0-OpenSSH\r\n\r\n",
		"header line":    "HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
		"length":         "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
		"two lengths":    "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
		"too large":      fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", MaxBodyBytes+1),
		"short body":     "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc",
		"cut in head":    "HTTP/1.1 200 OK\r\nX-A: 1\r\n",
		"bad chunk":      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
		"head too large": "HTTP/1.1 200 OK\r\nX-A: " + strings.Repeat("a", MaxHeadBytes) + "\r\n\r\n",
		"nothing":        "",
	}
	for name, resp := range cases {
		t.Run(name, func(t *testing.T) {
			s := newScript(t, answerEach(resp, 1))
			_, err := newRawClient(4, 5*time.Second).do(context.Background(), "http", s.addr(), get("/"))
			require.Error(t, err)
		})
	}
}

// Connections are kept and reused; one the server closed while idle is
// noticed before use, and one that closes under a GET is retried once on
// a new connection.
func TestRawClientReusesConnections(t *testing.T) {
	ok := "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
	s := newScript(t, answerEach(ok, 3))
	rc := newRawClient(4, 5*time.Second)
	for range 3 {
		resp, err := rc.do(context.Background(), "http", s.addr(), get("/"))
		require.NoError(t, err)
		require.Equal(t, "ok", string(resp.body))
	}
	require.EqualValues(t, 1, s.conns.Load(), "three calls on one connection")
	// The server has closed it after three answers: the next call, a
	// POST that must not be sent twice, finds that out before sending.
	rc.mu.Lock()
	kept := rc.idle["http://"+s.addr()]
	rc.mu.Unlock()
	require.Len(t, kept, 1)
	require.Eventually(t, func() bool { return !stillOpen(kept[0]) }, 2*time.Second, 5*time.Millisecond,
		"the server's close reaches this side")
	post := &outRequest{method: "POST", target: "/", headers: [][2]string{{"Content-Length", "1"}}, body: []byte("x")}
	_, err := rc.do(context.Background(), "http", s.addr(), post)
	require.NoError(t, err)
	require.EqualValues(t, 2, s.conns.Load())

	// A server that reads a request and closes without answering: a GET
	// on a kept connection is tried again, once, on a new one.
	var served atomic.Int32
	flaky := newScript(t, func(c net.Conn, br *bufio.Reader) {
		for {
			if _, err := readRequest(br, nil); err != nil {
				return
			}
			if served.Add(1) == 2 {
				return // the second request dies unanswered
			}
			if _, err := io.WriteString(c, ok); err != nil {
				return
			}
		}
	})
	_, err = rc.do(context.Background(), "http", flaky.addr(), get("/"))
	require.NoError(t, err)
	_, err = rc.do(context.Background(), "http", flaky.addr(), get("/"))
	require.NoError(t, err, "retried on a new connection")
	require.EqualValues(t, 3, served.Load())
	require.EqualValues(t, 2, flaky.conns.Load())
	// A POST dying the same way is not sent again.
	served.Store(1)
	_, err = rc.do(context.Background(), "http", flaky.addr(), post)
	require.ErrorIs(t, err, errNothingBack)
	require.EqualValues(t, 2, served.Load())
}

// The idle pool holds at most perHost connections per target; more given
// back are closed. A call that gets no answer ends at the timeout.
func TestRawClientBounds(t *testing.T) {
	ok := "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
	gate := make(chan struct{})
	s := newScript(t, func(c net.Conn, br *bufio.Reader) {
		<-gate
		answerEach(ok, 10)(c, br)
	})
	rc := newRawClient(2, 5*time.Second)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = rc.do(context.Background(), "http", s.addr(), get("/"))
		}()
	}
	require.Eventually(t, func() bool { return s.conns.Load() == 4 }, 2*time.Second, 5*time.Millisecond)
	close(gate)
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	rc.mu.Lock()
	require.Len(t, rc.idle[`http://`+s.addr()], 2, "two kept, two closed")
	require.Equal(t, 2, rc.total)
	rc.mu.Unlock()

	silent := newScript(t, func(c net.Conn, br *bufio.Reader) { _, _ = io.Copy(io.Discard, br) })
	start := time.Now()
	_, err := newRawClient(2, 200*time.Millisecond).do(context.Background(), "http", silent.addr(), get("/"))
	require.Error(t, err)
	require.Less(t, time.Since(start), 2*time.Second)
}

// Bytes after an answer that nobody asked for: the connection is not
// kept, so they never become the answer to the next request.
func TestRawClientDropsAConnectionWithStrayBytes(t *testing.T) {
	s := newScript(t, func(c net.Conn, br *bufio.Reader) {
		for {
			if _, err := readRequest(br, nil); err != nil {
				return
			}
			if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"); err != nil {
				return
			}
		}
	})
	rc := newRawClient(4, 5*time.Second)
	for range 2 {
		resp, err := rc.do(context.Background(), "http", s.addr(), get("/"))
		require.NoError(t, err)
		require.Equal(t, 200, resp.status)
	}
	require.EqualValues(t, 2, s.conns.Load())
}

// A request framed two ways (Content-Length and chunked) goes upstream
// framed one way, as it was read: chunked, with no Content-Length, so the
// upstream cannot read a different body or a second request from it.
func TestProxyFramesTheBodyOneWay(t *testing.T) {
	got := make(chan *wireRequest, 1)
	up := newScript(t, func(c net.Conn, br *bufio.Reader) {
		wr, err := readRequest(br, nil)
		if err != nil {
			return
		}
		got <- wr
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
	})
	base, _ := admin(t)
	proxy := create(t, base, fmt.Sprintf(`{"protocol":"http","stubs":[{"responses":[{"proxy":{"to":"http://%s","mode":"proxyTransparent"}}]}]}`, up.addr()))
	answer := raw(t, proxy, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
	require.True(t, strings.HasPrefix(answer, "HTTP/1.1 200 OK"), answer)
	wr := <-got
	require.True(t, wr.chunked)
	require.Equal(t, "hello", string(wr.body))
	_, sized := wr.header("Content-Length")
	require.False(t, sized, "%v", wr.headers)
}
