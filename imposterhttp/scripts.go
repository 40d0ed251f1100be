package imposterhttp

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fenceline/fenceline/imposter"
	"github.com/fenceline/fenceline/script"
)

// AllowInjection lets the server's imposters run injected JavaScript and
// shellTransform commands (the -allowInjection flag), each call bounded
// by budget (script.DefaultBudget if 0). Without it an imposter that
// carries either is refused at creation, as mountebank refuses it
// without --allowInjection.
func (s *Server) AllowInjection(budget time.Duration) {
	if budget <= 0 {
		budget = script.DefaultBudget
	}
	env := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	s.injection = &script.Host{Budget: budget, Env: env, Shell: runShell}
}

// InjectionAllowed reports whether AllowInjection was called.
func (s *Server) InjectionAllowed() bool { return s.injection != nil }

// giveScripts hands a built imposter what its JavaScript runs with: the
// server's log under the imposter's name, outbound requests under the
// proxies' egress policy.
func (s *Server) giveScripts(imp *imposter.Imposter) {
	if imp == nil || s.injection == nil {
		return
	}
	h := *s.injection
	h.Scope = fmt.Sprintf("[%s:%d] ", imp.Protocol, imp.Port)
	h.Log = func(level, msg string) {
		switch level {
		case "error":
			s.log.Error(msg)
		case "warn":
			s.log.Warn(msg)
		case "debug":
			s.log.Debug(msg)
		default:
			s.log.Info(msg)
		}
	}
	h.HTTP = s.scriptHTTP
	imp.UseScripts(&h)
}

// scriptHTTP is an injected function's outbound request (require('http')),
// made as a proxy's: under the egress policy, through the same client.
func (s *Server) scriptHTTP(ctx context.Context, r script.HTTPRequest) (script.HTTPResponse, error) {
	if r.Scheme != "http" && r.Scheme != "https" {
		return script.HTTPResponse{}, fmt.Errorf("protocol %q is not supported", r.Scheme+":")
	}
	if r.Host == "" || r.Port <= 0 || r.Port > 65535 {
		return script.HTTPResponse{}, fmt.Errorf("no host and port to connect to (%q, %d)", r.Host, r.Port)
	}
	host := r.Host
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	headers := make([][2]string, 0, len(r.Headers)+2)
	hasHost := false
	for _, h := range r.Headers {
		hasHost = hasHost || strings.EqualFold(h[0], "host")
		headers = append(headers, h)
	}
	if !hasHost {
		headers = append([][2]string{{"Host", host + ":" + strconv.Itoa(r.Port)}}, headers...)
	}
	headers = framedHeaders(headers, false, len(r.Body))
	path := r.Path
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	req := &outRequest{method: r.Method, target: path, headers: headers, body: r.Body}
	resp, err := upstreamClient.call(ctx, r.Scheme, net.JoinHostPort(r.Host, strconv.Itoa(r.Port)), req, &dialPolicy{egress: s.egressPolicy(), verify: true})
	if err != nil {
		return script.HTTPResponse{}, err
	}
	return script.HTTPResponse{Status: resp.status, Headers: resp.headers, Body: resp.body}, nil
}

// respondScripted is the answer to a request for a scripted imposter
// (imposter.ServeScripted). done means the outcome is final.
func (s *Server) respondScripted(sv *served, wr *wireRequest, req *imposter.Request) (out imposter.Outcome, done bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), stateTimeout+2*s.injectionBudget())
	defer cancel()
	var res imposter.Served
	imposter.ServeScripted(httpWorld{ctx: ctx, s: s, sv: sv, wr: wr, from: req.RequestFrom},
		imposter.Route{Forward: s.route == RouteForward && !wr.tcp, Forwarded: wr.forwarded},
		req, func(r imposter.Served, e error) { res, err = r, e })
	if res.Transition != nil && !res.Moved {
		s.lostRaces.Add(1)
	}
	return res.Outcome, res.Final, err
}

func (s *Server) injectionBudget() time.Duration {
	if s.injection == nil {
		return script.DefaultBudget
	}
	return s.injection.Budget
}

// injectionErrors is what the validator says of a creation on a server
// that does not allow injection.
func (s *Server) injectionErrors(imp *imposter.Imposter) []error {
	if s.injection != nil || imp == nil {
		return nil
	}
	return imp.InjectionErrors()
}
