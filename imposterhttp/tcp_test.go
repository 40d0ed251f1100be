package imposterhttp

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tcpAsk sends data on a new connection and reads what comes back within
// a short while (a tcp answer has no end but the bytes).
func tcpAsk(t *testing.T, port int, data []byte) []byte {
	t.Helper()
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Write(data)
	require.NoError(t, err)
	return readFor(c, 300*time.Millisecond)
}

func readFor(c net.Conn, d time.Duration) []byte {
	_ = c.SetReadDeadline(time.Now().Add(d))
	var got []byte
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			return got
		}
	}
}

// tcp imposters as mountebank's documentation shows them: text and
// binary mode, predicates on data, is, behaviors, recorded requests.
func TestTCPImposter(t *testing.T) {
	base, _ := admin(t)
	port := create(t, base, `{"protocol":"tcp","recordRequests":true,"stubs":[
		{"predicates":[{"contains":{"data":"sayHello"}}],"responses":[{"is":{"data":"hello, world!"}}]},
		{"predicates":[{"startsWith":{"data":"copy "}}],"responses":[{"is":{"data":"got ${x}"},"behaviors":[{"copy":{"from":"data","into":"${x}","using":{"method":"regex","selector":"\\w+$"}}}]}]},
		{"predicates":[{"equals":{"data":"reset"}}],"responses":[{"fault":"CONNECTION_RESET_BY_PEER"}]}
	]}`)
	assert.Equal(t, "hello, world!", string(tcpAsk(t, port, []byte("sayHello\n"))))
	assert.Equal(t, "got there", string(tcpAsk(t, port, []byte("copy there"))))
	assert.Empty(t, tcpAsk(t, port, []byte("nothing matches")), "the default response writes nothing")

	// The connection stays open for the next request.
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	require.NoError(t, err)
	defer c.Close()
	for range 2 {
		_, err = c.Write([]byte("sayHello"))
		require.NoError(t, err)
		assert.Equal(t, "hello, world!", string(readFor(c, 200*time.Millisecond)))
	}

	a := do(t, "GET", fmt.Sprintf("%s/imposters/%d", base, port), "")
	require.Equal(t, 200, a.code)
	assert.Equal(t, "tcp", a.json["protocol"])
	assert.Equal(t, "text", a.json["mode"])
	reqs := a.json["requests"].([]any)
	require.Len(t, reqs, 5)
	first := reqs[0].(map[string]any)
	assert.Equal(t, "sayHello\n", first["data"])
	assert.Contains(t, first["requestFrom"], "127.0.0.1:")
	assert.Equal(t, "127.0.0.1", first["ip"])

	bin := create(t, base, `{"protocol":"tcp","mode":"binary","stubs":[
		{"predicates":[{"equals":{"data":"AQID"}}],"responses":[{"is":{"data":"BAUG"}}]}]}`)
	assert.Equal(t, []byte{4, 5, 6}, tcpAsk(t, bin, []byte{1, 2, 3}))
}

// An endOfRequestResolver gathers packets into one request, and a tcp
// proxy records its upstream's answer.
func TestTCPResolverAndProxy(t *testing.T) {
	base, _ := scripting(t, 2*time.Second)
	port := create(t, base, `{"protocol":"tcp","mode":"binary","recordRequests":true,
		"endOfRequestResolver":{"inject":"function (requestData, logger) { return requestData.length >= 4 && requestData.length >= requestData.readInt32BE(0); }"},
		"stubs":[{"responses":[{"is":{"data":"`+base64.StdEncoding.EncodeToString([]byte("whole"))+`"}}]}]}`)
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	require.NoError(t, err)
	defer c.Close()
	msg := append([]byte{0, 0, 0, 10}, []byte("abcdef")...)
	_, err = c.Write(msg[:5])
	require.NoError(t, err)
	assert.Empty(t, readFor(c, 200*time.Millisecond), "half a request is not answered")
	_, err = c.Write(msg[5:])
	require.NoError(t, err)
	assert.Equal(t, "whole", string(readFor(c, 300*time.Millisecond)))
	a := do(t, "GET", fmt.Sprintf("%s/imposters/%d", base, port), "")
	reqs := a.json["requests"].([]any)
	require.Len(t, reqs, 1, "one request of two packets")
	assert.Equal(t, base64.StdEncoding.EncodeToString(msg), reqs[0].(map[string]any)["data"])

	// An upstream that answers lines in upper case.
	up, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer up.Close()
	go func() {
		for {
			conn, err := up.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				line, _ := bufio.NewReader(conn).ReadString('\n')
				_, _ = conn.Write([]byte(strings.ToUpper(line)))
			}()
		}
	}()
	px := create(t, base, `{"protocol":"tcp","stubs":[{"responses":[{"proxy":{"to":"tcp://`+up.Addr().String()+`","predicateGenerators":[{"matches":{"data":true}}]}}]}]}`)
	assert.Equal(t, "HELLO\n", string(tcpAsk(t, px, []byte("hello\n"))))
	up.Close() // the recording answers now
	assert.Equal(t, "HELLO\n", string(tcpAsk(t, px, []byte("hello\n"))))
	a = do(t, "GET", fmt.Sprintf("%s/imposters/%d", base, px), "")
	assert.Contains(t, a.body, `"deepEquals": {`)
	assert.Contains(t, a.body, `"data": "HELLO\n"`)
}

// A client that never ends its request is cut off at the bound, and the
// imposter goes on serving.
func TestTCPRequestBound(t *testing.T) {
	base, _ := scripting(t, 2*time.Second)
	port := create(t, base, `{"protocol":"tcp","endOfRequestResolver":{"inject":"() => false"},"stubs":[{"responses":[{"is":{"data":"x"}}]}]}`)
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	require.NoError(t, err)
	defer c.Close()
	chunk := make([]byte, 64<<10)
	var werr error
	for sent := 0; sent <= MaxTCPRequest+len(chunk) && werr == nil; sent += len(chunk) {
		_, werr = c.Write(chunk)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, rerr := c.Read(make([]byte, 16))
	require.Error(t, rerr, "the connection is closed")
	assert.NotErrorIs(t, rerr, os.ErrDeadlineExceeded, "closed, not left hanging")
	a := do(t, "GET", fmt.Sprintf("%s/imposters/%d", base, port), "")
	assert.EqualValues(t, 0, a.json["numberOfRequests"])
}
