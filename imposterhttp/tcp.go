package imposterhttp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"time"

	"github.com/fenceline/fenceline/imposter"
)

// tcp imposters (imposter/tcp.go) on real sockets: each connection is
// read packet by packet, a request made of each packet or of what the
// endOfRequestResolver says is one, and answered on the same connection,
// which stays open until the client closes it, as mountebank's does.
// What one request may hold is bounded by MaxTCPRequest: past it the
// connection is closed. (The resolver sees everything gathered so far on
// every packet, as mountebank's does: the bound also bounds that work.)

// MaxTCPRequest bounds one tcp request, and a tcp proxy's answer.
const MaxTCPRequest = 1 << 20

// serveTCP answers one tcp connection's requests in turn.
func (s *Server) serveTCP(sv *served, c net.Conn) {
	defer sv.untrack(c)
	remote := c.RemoteAddr().String()
	ip, _, _ := net.SplitHostPort(remote)
	buf := make([]byte, 64<<10)
	var pending []byte
	for {
		_ = c.SetReadDeadline(time.Now().Add(IdleTimeout))
		n, err := c.Read(buf)
		if n > 0 {
			pending = append(pending, buf[:n]...)
			if len(pending) > MaxTCPRequest {
				s.log.Warn(fmt.Sprintf("[tcp:%d] %s sent more than %d bytes without an end of request: closed", sv.port, remote, MaxTCPRequest))
				return
			}
			sv.mu.Lock()
			end := sv.imp.EndOfRequest(pending)
			data, match := sv.imp.RequestData(pending), sv.imp.MatchText(pending)
			sv.mu.Unlock()
			if end {
				pending = nil
				req := &imposter.Request{TCP: true, Data: data, MatchData: match, RequestFrom: remote, IP: ip, Arrived: time.Now()}
				out := s.answer(sv, &wireRequest{tcp: true, keepAlive: true}, req)
				if !waitOrFault(c, out) {
					return
				}
				if len(out.Body) > 0 {
					_ = c.SetWriteDeadline(time.Now().Add(IdleTimeout))
					if _, err := c.Write(out.Body); err != nil {
						return
					}
				}
			}
		}
		if err != nil {
			return // closed, timed out or reset
		}
	}
}

// callTCP is a tcp proxy's call: the request's data written to the
// upstream, its answer read packet by packet until the imposter's
// endOfRequestResolver says it is whole (the first packet without one),
// or the upstream closes; under the egress policy and UpstreamTimeout.
func (h *imposterHandler) callTCP(c *imposter.ProxyCall) (imposter.Upstream, error) {
	u, err := url.Parse(c.To)
	if err != nil || u.Scheme != "tcp" || u.Hostname() == "" || u.Port() == "" {
		return imposter.Upstream{}, fmt.Errorf("proxy target %q is no tcp://host:port", c.To)
	}
	ctx, cancel := context.WithTimeout(context.Background(), UpstreamTimeout)
	defer cancel()
	d := net.Dialer{}
	eg := h.s.egressPolicy()
	if eg != nil {
		name := hostName(u.Hostname())
		if err := eg.permitsName(name); err != nil {
			return imposter.Upstream{}, err
		}
		d.Control = eg.control(name)
	}
	start := time.Now()
	conn, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return imposter.Upstream{}, err
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	if _, err := conn.Write(c.Data()); err != nil {
		return imposter.Upstream{}, err
	}
	buf := make([]byte, 64<<10)
	var got []byte
	for {
		n, err := conn.Read(buf)
		if n > 0 {
			got = append(got, buf[:n]...)
			if len(got) > MaxTCPRequest {
				return imposter.Upstream{}, fmt.Errorf("the upstream sent more than %d bytes", MaxTCPRequest)
			}
			h.sv.mu.Lock()
			end := h.sv.imp.EndOfRequest(got)
			h.sv.mu.Unlock()
			if end {
				break
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return imposter.Upstream{}, err
		}
	}
	return imposter.Upstream{Body: got, Elapsed: time.Since(start)}, nil
}
