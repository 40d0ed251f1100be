package imposterhttp

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// raw sends bytes to an imposter and returns everything it answers until
// it closes the connection or goes quiet.
func raw(t *testing.T, port int, send string) string {
	t.Helper()
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, send)
	require.NoError(t, err)
	_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	b, _ := io.ReadAll(c)
	return string(b)
}

// The request as the client sent it: header names in their case and
// order, a name repeated in one case an array, in two cases two keys.
func TestWireKeepsRequestHeadersAsSent(t *testing.T) {
	base, _ := admin(t)
	port := create(t, base, `{"protocol":"http","recordRequests":true}`)
	got := raw(t, port, "GET /x?a=1 HTTP/1.1\r\nhost: example\r\nx-lower: a\r\nX-Dup: one\r\nX-Dup: two\r\nX-Custom: Value1\r\nx-custom: value2\r\nConnection: close\r\n\r\n")
	require.True(t, strings.HasPrefix(got, "HTTP/1.1 200 OK\r\n"), got)
	body := do(t, "GET", fmt.Sprintf("%s/imposters/%d", base, port), "").body
	require.Contains(t, body, `"headers": {
        "host": "example",
        "x-lower": "a",
        "X-Dup": [
          "one",
          "two"
        ],
        "X-Custom": "Value1",
        "x-custom": "value2",
        "Connection": "close"
      }`)
}

// The response as the stub wrote it: its headers in order and case, then
// Date and the length.
func TestWireWritesResponseHeadersAsGiven(t *testing.T) {
	base, _ := admin(t)
	port := create(t, base, `{"protocol":"http","stubs":[
		{"predicates":[{"equals":{"method":"GET"}}],"responses":[{"is":{"statusCode":201,"headers":{"x-b":"2","X-A":["1","one"],"content-type":"text/plain"},"body":"hi"}}]},
		{"predicates":[{"equals":{"method":"HEAD"}}],"responses":[{"is":{"body":"not sent"}}]},
		{"predicates":[{"equals":{"method":"DELETE"}}],"responses":[{"is":{"statusCode":204,"headers":{"Connection":"keep-alive"}}}]},
		{"predicates":[{"equals":{"method":"PUT"}}],"responses":[{"is":{"headers":{"Transfer-Encoding":"chunked"},"body":"chunky"}}]}]}`)
	got := raw(t, port, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	head, body, _ := strings.Cut(got, "\r\n\r\n")
	lines := strings.Split(head, "\r\n")
	require.Equal(t, []string{"HTTP/1.1 201 Created", "x-b: 2", "X-A: 1", "X-A: one", "content-type: text/plain", "Connection: close"}, lines[:6])
	require.True(t, strings.HasPrefix(lines[6], "Date: "), lines[6])
	require.Equal(t, "Transfer-Encoding: chunked", lines[7], "no length given: chunked, as mountebank's node server sends it")
	require.Equal(t, "2\r\nhi\r\n0\r\n\r\n", body)
	got = raw(t, port, "GET / HTTP/1.0\r\nHost: x\r\n\r\n")
	require.Contains(t, got, "\r\nContent-Length: 2\r\n", "no chunks for HTTP/1.0")
	require.True(t, strings.HasSuffix(got, "\r\n\r\nhi"), got)

	got = raw(t, port, "HEAD / HTTP/1.1\r\nHost: x\r\n\r\n")
	require.True(t, strings.HasSuffix(got, "\r\n\r\n"), "HEAD: no body: %q", got)
	require.NotContains(t, got, "not sent")

	got = raw(t, port, "DELETE / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	require.True(t, strings.HasPrefix(got, "HTTP/1.1 204 No Content\r\n"), got)
	require.NotContains(t, got, "Content-Length")

	got = raw(t, port, "PUT / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
	require.True(t, strings.HasSuffix(got, "\r\n\r\n6\r\nchunky\r\n0\r\n\r\n"), "a stub that says chunked is chunked: %q", got)
}

// Framing of requests: chunked bodies, Expect: 100-continue, several
// requests on one connection, HTTP/1.0.
func TestWireFraming(t *testing.T) {
	base, _ := admin(t)
	port := create(t, base, `{"protocol":"http","recordRequests":true,"stubs":[{"responses":[{"is":{"headers":{"Connection":"keep-alive"},"body":"ok"}}]}]}`)
	got := raw(t, port, "POST /chunked HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nTrailer: x\r\n\r\n"+
		"POST /expect HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\nabc"+
		"GET /last HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	require.Equal(t, 3, strings.Count(got, "HTTP/1.1 200 OK"), "three answers on one connection: %q", got)
	require.Contains(t, got, "HTTP/1.1 100 Continue\r\n\r\n")
	imp := do(t, "GET", fmt.Sprintf("%s/imposters/%d", base, port), "").json
	reqs := imp["requests"].([]any)
	require.Len(t, reqs, 3)
	require.Equal(t, "hello world", reqs[0].(map[string]any)["body"])
	require.Equal(t, "abc", reqs[1].(map[string]any)["body"])

	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	require.NoError(t, err)
	defer c.Close()
	_, _ = io.WriteString(c, "GET /old HTTP/1.0\r\n\r\n")
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	b, err := io.ReadAll(c)
	require.NoError(t, err, "HTTP/1.0 without keep-alive: the server closes")
	require.True(t, strings.HasSuffix(string(b), "ok"))
}

// Bad input gets a clear status and the connection ends; the imposter
// goes on serving.
func TestWireRefusals(t *testing.T) {
	base, s := admin(t)
	port := create(t, base, `{"protocol":"http","stubs":[{"responses":[{"is":{"body":"ok"}}]}]}`)
	for _, tc := range []struct{ send, want string }{
		{"NONSENSE\r\n\r\n", "HTTP/1.1 400 Bad Request"},
		{"GET / HTTP/1.1\r\nbad header line\r\n\r\n", "HTTP/1.1 400 Bad Request"},
		{"GET / HTTP/1.1\r\nX: a\r\n folded\r\n\r\n", "HTTP/1.1 400 Bad Request"},
		{"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", "HTTP/1.1 400 Bad Request"},
		{"POST / HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n", "HTTP/1.1 413 Request Entity Too Large"},
		{"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "HTTP/1.1 400 Bad Request"},
		{"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\nabc", "HTTP/1.1 400 Bad Request"},
		{"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n0\r\n\r\n", "HTTP/1.1 400 Bad Request"},
		{"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", "HTTP/1.1 400 Bad Request"},
		{"GET / HTTP/1.1\r\nX-Big: " + strings.Repeat("a", MaxHeadBytes) + "\r\n\r\n", "HTTP/1.1 431 Request Header Fields Too Large"},
	} {
		require.True(t, strings.HasPrefix(raw(t, port, tc.send), tc.want), "%.60q", tc.send)
	}
	require.Equal(t, "ok", do(t, "GET", at(port, "/"), "").body, "still serving")

	// Connections past the bound are closed at once.
	s.maxConns = 2
	p2 := create(t, base, `{"protocol":"http","stubs":[{"responses":[{"is":{"headers":{"Connection":"keep-alive"},"body":"ok"}}]}]}`)
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", p2))
		require.NoError(t, err)
		defer c.Close()
		_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		_, err = bufio.NewReader(c).ReadString('k') // "ok" arrived: the connection is being served
		require.NoError(t, err)
		held = append(held, c)
	}
	third, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", p2))
	require.NoError(t, err)
	defer third.Close()
	_ = third.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, err = third.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF, "the third connection is closed")
	require.Len(t, held, 2)
}
