package imposterhttp

// Fuzz targets for what strangers send (issue 26): requests on an
// imposter's connections, answers from a proxied upstream, and the admin
// API's creation bodies. scripts/fuzz runs each for a fixed time.

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/imposter"
)

// wireRequests are requests as clients send them, for the seed corpus.
var wireRequests = []string{
	"GET /orders/7?expand=items&a=1&a=2 HTTP/1.1\r\nHost: example\r\nAccept: */*\r\nX-Dup: one\r\nX-Dup: two\r\nx-dup: three\r\n\r\n",
	"POST /orders HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 20\r\n\r\n{\"order\":{\"id\":\"7\"}}",
	"POST /chunked HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nTrailer: x\r\n\r\n",
	"POST /expect HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\nabc",
	"POST /login HTTP/1.1\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 25\r\n\r\nuser=alice&pass=s%203cret",
	"POST /gz HTTP/1.1\r\nContent-Encoding: gzip\r\nContent-Length: 23\r\n\r\n\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xffJ\xcc\x01\x04\x00\x00\xff\xff\x9f\x8c\x8b\x8f\x02\x00",
	"GET /old HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
	"\r\n\r\nGET http://example.com/a/../b/./c HTTP/1.1\nHost: example.com\n\n",
	"OPTIONS * HTTP/1.1\r\nHost: x\r\n" + ForwardedHeader + ": 10.0.0.1:5000;1;mac\r\n\r\n",
	"POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
	"NONSENSE\r\n\r\n",
	"GET / HTTP/1.1\r\nX: a\r\n folded\r\n\r\n",
	"POST / HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n",
	"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
	"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffff\r\n",
}

// pipelined is the request that follows the fuzzed one on its connection.
const pipelined = "GET /next HTTP/1.1\r\nHost: x\r\n\r\n"

// FuzzReadRequest reads arbitrary bytes as a request on an imposter's
// connection. Nothing panics; a refusal is one of the errors serveConn
// answers (400, 413, 431) or the connection's end; a request read has a
// head within MaxHeadBytes and a body within MaxBodyBytes; the read
// takes exactly the request's bytes, so the request after it on the
// connection (pipelining) is read next, whole; and the request as a
// member forwards it to the flow's owner reads back as the same one
// request.
func FuzzReadRequest(f *testing.F) {
	for _, s := range wireRequests {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		wr, n, err := readOne(data)
		if err != nil {
			if !errors.Is(err, errMalformed) && !errors.Is(err, errHeadLarge) && !errors.Is(err, errTooLarge) &&
				!errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("readRequest's error %T %v is none serveConn answers", err, err)
			}
			return
		}
		require.LessOrEqual(t, len(wr.body), MaxBodyBytes)
		head := len(wr.method) + len(wr.target)
		for _, h := range wr.headers {
			require.NotEmpty(t, h[0])
			require.NotContains(t, h[0], " ")
			head += len(h[0]) + len(h[1])
		}
		require.LessOrEqual(t, head, MaxHeadBytes)
		require.NotEmpty(t, wr.method)
		require.NotEmpty(t, wr.target)

		// Pipelining: the read stopped at the request's end.
		stream := append(bytes.Clone(data[:n]), pipelined...)
		br := bufio.NewReaderSize(bytes.NewReader(stream), 16<<10)
		again, err := readRequest(br, nil)
		require.NoError(t, err)
		require.Equal(t, wr, again)
		next, err := readRequest(br, nil)
		require.NoError(t, err, "the request after %q", data[:n])
		require.Equal(t, "/next", next.target)
		_, err = readRequest(br, nil)
		require.ErrorIs(t, err, io.EOF)

		// Forwarded as flows.go's forward writes it (the loop guard
		// aside): the same request, and nothing after it.
		target := wr.target
		if !strings.HasPrefix(target, "/") {
			target = "/"
		}
		out := &outRequest{method: wr.method, target: target, body: wr.body, chunked: wr.chunked}
		for _, h := range wr.headers {
			if !strings.EqualFold(h[0], ForwardedHeader) {
				out.headers = append(out.headers, h)
			}
		}
		out.headers = framedHeaders(out.headers, wr.chunked, len(wr.body))
		var sent bytes.Buffer
		bw := bufio.NewWriter(&sent)
		writeRequest(bw, out)
		require.NoError(t, bw.Flush())
		fwd, m, err := readOne(sent.Bytes())
		require.NoError(t, err, "the forwarded request %q", sent.Bytes())
		require.Equal(t, sent.Len(), m, "the forwarded request %q reads as more than one", sent.Bytes())
		require.Equal(t, out.method, fwd.method)
		require.Equal(t, out.target, fwd.target)
		require.Equal(t, orNil(out.headers), fwd.headers)
		require.Equal(t, string(wr.body), string(fwd.body))

		// What the engine sees of it.
		req := toEngineRequest(wr, "127.0.0.1:5000")
		require.LessOrEqual(t, len(req.Body), MaxBodyBytes)
		_ = imposter.Marshal(req.Value(), 0)
	})
}

// readOne reads one request from data as serveConn does and says how
// many bytes it took.
func readOne(data []byte) (*wireRequest, int, error) {
	rd := bytes.NewReader(data)
	br := bufio.NewReaderSize(rd, 16<<10)
	var interim bytes.Buffer
	bw := bufio.NewWriter(&interim)
	wr, err := readRequest(br, bw)
	return wr, len(data) - rd.Len() - br.Buffered(), err
}

// upstreamAnswers are answers as servers write them, for the seed corpus.
var upstreamAnswers = []string{
	"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"ok\":true}",
	"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n1;x=y\r\nc\r\n0\r\nX-Trailer: t\r\n\r\n",
	"HTTP/1.1 200 OK\r\n\r\nabc",
	"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\na",
	"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\na",
	"HTTP/1.1 204 No Content\r\nSet-Cookie: a=1\r\nset-cookie: b=2\r\nSet-Cookie: c=3\r\n\r\n",
	"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 1\r\n\r\nabc",
	"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
	"HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n",
	"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n",
	"HTTP/1.1 OK\r\n\r\n",
	"SSH-2.0-OpenSSH\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\n",
}

// FuzzReadResponse reads arbitrary bytes as a proxied upstream's answer,
// to a GET or a HEAD. Nothing panics; an answer read has a status of
// three digits, a head within MaxHeadBytes and a body within
// MaxBodyBytes; on a kept connection the read takes exactly the answer's
// bytes, so the next answer is read next, whole.
func FuzzReadResponse(f *testing.F) {
	for _, s := range upstreamAnswers {
		f.Add([]byte(s), false)
	}
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n"), true)
	f.Fuzz(func(t *testing.T, data []byte, head bool) {
		method := "GET"
		if head {
			method = "HEAD"
		}
		rd := bytes.NewReader(data)
		br := bufio.NewReader(rd)
		resp, err := readResponse(br, method)
		if err != nil {
			return
		}
		n := len(data) - rd.Len() - br.Buffered()
		require.GreaterOrEqual(t, resp.status, 100)
		require.Less(t, resp.status, 1000)
		require.LessOrEqual(t, len(resp.body), MaxBodyBytes)
		size := 0
		for _, h := range resp.headers {
			require.NotEmpty(t, h[0])
			size += len(h[0]) + len(h[1])
		}
		require.LessOrEqual(t, size, MaxHeadBytes)
		if !resp.keepAlive {
			return
		}
		const next = "HTTP/1.1 202 Accepted\r\nContent-Length: 4\r\n\r\nnext"
		br = bufio.NewReader(bytes.NewReader(append(bytes.Clone(data[:n]), next...)))
		again, err := readResponse(br, method)
		require.NoError(t, err)
		require.Equal(t, resp, again)
		after, err := readResponse(br, method)
		require.NoError(t, err, "the answer after %q", data[:n])
		require.Equal(t, 202, after.status)
		if method == "GET" {
			require.Equal(t, "next", string(after.body))
		}
	})
}

// FuzzAdminCreation reads an arbitrary body as POST /imposters does and
// validates it, without binding a port. Nothing panics; every error is
// a *imposter.Error (writeErrors sends each as mountebank's error
// object); and a creation that validates builds, on every member, from
// the definition the cluster stores for it.
func FuzzAdminCreation(f *testing.F) {
	for _, s := range []string{
		`{"protocol":"http","port":4545,"stubs":[{"predicates":[{"equals":{"path":"/x"}}],"responses":[{"is":{"statusCode":201,"body":"hi"}}]}]}`,
		`{"protocol":"http","port":"4546","name":"proxy","stubs":[{"responses":[{"proxy":{"to":"https://example.com","mode":"proxyAlways","addWaitBehavior":true}}]}]}`,
		`{"protocol":"https","key":"-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----","cert":"x"}`,
		`{"protocol":"https","mutualAuth":true}`,
		`{"protocol":"http","port":65536}`,
		`{"protocol":"http","port":1.5}`,
		`{"protocol":"tcp"}`,
		`{"port":4545}`,
		`{"protocol":"http","stubs":[{"responses":[{"is":{"headers":"x"}}]}]}`,
		`{"protocol":"http","_rift":{"flowState":{"flowIdSource":"header:X-Flow","ttlSeconds":30}},"stubs":[{"scenarioName":"s","requiredScenarioState":"Started","newScenarioState":"b","responses":[{"is":{}}]}]}`,
		`[]`, `"http"`, ``, ` `, `{`, `null`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		// readJSON and post, up to the proposal.
		var v any = imposter.NewObject()
		if strings.TrimSpace(body) != "" {
			var err error
			if v, err = imposter.Parse(body); err != nil {
				return // 400 invalid JSON
			}
		}
		creation, isObj := v.(*imposter.Object)
		if !isObj {
			creation = imposter.NewObject()
		}
		if errs := (&Server{}).validate(creation); errs != nil {
			for _, err := range errs {
				var e *imposter.Error
				require.True(t, errors.As(err, &e), "validate's error %T %v is no *imposter.Error", err, err)
			}
			return
		}
		port, err := checkPort(creation)
		require.NoError(t, err)
		if port == 0 {
			port = 4545 // reserve assigns one
		}
		creation = imposter.Clone(creation).(*imposter.Object)
		if _, has := creation.Get("port"); has {
			creation.Set("port", float64(port))
		}
		d := Definition{Port: port, JSON: newStored(creation).Encode()}
		s := &Server{}
		_, imp, err := s.build(d)
		require.NoError(t, err, "a creation that validated does not build from %s", d.JSON)
		_ = imposter.Marshal(imp.Value(imposter.PrintOptions{BaseURL: "http://localhost:2525"}), 2)
	})
}

// orNil makes an empty list of headers nil, as a read of none leaves it.
func orNil(h [][2]string) [][2]string {
	if len(h) == 0 {
		return nil
	}
	return h
}
