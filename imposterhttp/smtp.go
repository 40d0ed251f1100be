package imposterhttp

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"strings"
	"time"

	"github.com/fenceline/fenceline/imposter"
)

// smtp imposters accept mail and record each message as mountebank's
// do: the envelope, the parsed headers, the text and html bodies and the
// attachments, as one request (imposter.Request.Fields) that stubs match
// and recordRequests keeps; nothing is sent anywhere. The dialogue is
// SMTP's (RFC 5321) without TLS: HELO/EHLO, optional AUTH (any
// credentials), MAIL, RCPT, DATA, RSET, NOOP, QUIT. A command line is
// bounded by maxSMTPLine, a message by MaxBodyBytes, recipients by
// maxSMTPRecipients.

const (
	maxSMTPLine       = 4096
	maxSMTPRecipients = 1000
)

// serveSMTP holds one smtp session.
func (s *Server) serveSMTP(sv *served, c net.Conn) {
	defer sv.untrack(c)
	remote := c.RemoteAddr().String()
	ip, _, _ := net.SplitHostPort(remote)
	br := bufio.NewReaderSize(c, maxSMTPLine)
	bw := bufio.NewWriter(c)
	reply := func(lines ...string) bool {
		for _, l := range lines {
			bw.WriteString(l + "\r\n")
		}
		_ = c.SetWriteDeadline(time.Now().Add(IdleTimeout))
		return bw.Flush() == nil
	}
	if !reply("220 fenceline ESMTP") {
		return
	}
	var from string
	var rcpts []string
	for {
		_ = c.SetReadDeadline(time.Now().Add(IdleTimeout))
		line, err := br.ReadSlice('\n')
		if err != nil {
			if err == bufio.ErrBufferFull {
				reply("500 Error: line too long")
			}
			return
		}
		cmd := strings.TrimRight(string(line), "\r\n")
		verb, arg, _ := strings.Cut(cmd, " ")
		switch strings.ToUpper(verb) {
		case "EHLO":
			reply("250-fenceline Nice to meet you, "+ip, "250-PIPELINING", "250-8BITMIME", "250-SMTPUTF8", "250-AUTH LOGIN PLAIN", fmt.Sprintf("250 SIZE %d", MaxBodyBytes))
		case "HELO":
			reply("250 fenceline Nice to meet you, " + ip)
		case "AUTH":
			if !s.smtpAuth(br, c, reply, arg) {
				return
			}
		case "MAIL":
			addr, ok := smtpPath(arg, "FROM:")
			if !ok {
				reply("501 Error: bad sender address syntax")
				continue
			}
			from, rcpts = addr, nil
			reply("250 Accepted")
		case "RCPT":
			addr, ok := smtpPath(arg, "TO:")
			switch {
			case from == "" && !strings.Contains(strings.ToUpper(arg), "<>"):
				reply("503 Error: need MAIL command")
			case !ok:
				reply("501 Error: bad recipient address syntax")
			case len(rcpts) >= maxSMTPRecipients:
				reply("452 Error: too many recipients")
			default:
				rcpts = append(rcpts, addr)
				reply("250 Accepted")
			}
		case "DATA":
			if len(rcpts) == 0 {
				reply("503 Error: need RCPT command")
				continue
			}
			if !reply("354 End data with <CR><LF>.<CR><LF>") {
				return
			}
			msg, err := readSMTPData(br)
			if err != nil {
				if err == errTooLarge {
					reply("552 Error: message exceeds the fixed maximum message size")
					continue
				}
				return
			}
			req := &imposter.Request{RequestFrom: ip, IP: ip, Arrived: time.Now(), Fields: smtpRequest(ip, from, rcpts, msg)}
			sv.mu.Lock()
			_, _, _ = sv.imp.Respond(req) // counted, recorded and matched; the response goes nowhere
			sv.mu.Unlock()
			from, rcpts = "", nil
			reply("250 OK: message queued")
		case "RSET":
			from, rcpts = "", nil
			reply("250 Flushed")
		case "NOOP":
			reply("250 OK")
		case "QUIT":
			reply("221 Bye")
			return
		default:
			reply("502 Error: command not recognized")
		}
	}
}

// smtpAuth takes any credentials, as mountebank's (authOptional).
func (s *Server) smtpAuth(br *bufio.Reader, c net.Conn, reply func(...string) bool, arg string) bool {
	mech, initial, _ := strings.Cut(arg, " ")
	ask := func(prompt string) bool {
		if !reply("334 " + prompt) {
			return false
		}
		_ = c.SetReadDeadline(time.Now().Add(IdleTimeout))
		_, err := br.ReadSlice('\n')
		return err == nil
	}
	switch strings.ToUpper(mech) {
	case "PLAIN":
		if initial == "" && !ask("") {
			return false
		}
	case "LOGIN":
		if initial == "" && !ask(base64.StdEncoding.EncodeToString([]byte("Username:"))) {
			return false
		}
		if !ask(base64.StdEncoding.EncodeToString([]byte("Password:"))) {
			return false
		}
	default:
		return reply("504 Error: unrecognized authentication type")
	}
	return reply("235 Authentication successful")
}

// smtpPath reads the address of "FROM:<a@b> PARAMS" (or TO:).
func smtpPath(arg, prefix string) (string, bool) {
	if len(arg) < len(prefix) || !strings.EqualFold(arg[:len(prefix)], prefix) {
		return "", false
	}
	rest := strings.TrimSpace(arg[len(prefix):])
	if strings.HasPrefix(rest, "<") {
		end := strings.IndexByte(rest, '>')
		if end < 0 {
			return "", false
		}
		return rest[1:end], true
	}
	addr, _, _ := strings.Cut(rest, " ")
	return addr, addr != ""
}

// readSMTPData reads a message up to the lone ".", undoing dot-stuffing,
// within MaxBodyBytes (past it the rest is read and dropped).
func readSMTPData(br *bufio.Reader) ([]byte, error) {
	var msg bytes.Buffer
	over := false
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return nil, err
		}
		if line == ".\r\n" || line == ".\n" {
			break
		}
		line = strings.TrimPrefix(line, ".")
		if msg.Len()+len(line) > MaxBodyBytes {
			over = true
			continue
		}
		msg.WriteString(line)
	}
	if over {
		return nil, errTooLarge
	}
	return msg.Bytes(), nil
}

// smtpRequest is a message as mountebank records it.
func smtpRequest(ip, from string, rcpts []string, raw []byte) *imposter.Object {
	o := imposter.NewObject().Set("requestFrom", ip).Set("ip", ip).Set("envelopeFrom", from)
	to := make([]any, len(rcpts))
	for i, r := range rcpts {
		to[i] = r
	}
	o.Set("envelopeTo", to)
	m, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		m = &mail.Message{Header: mail.Header{}, Body: bytes.NewReader(raw)}
	}
	h := m.Header
	froms := addresses(h.Get("From"))
	if len(froms) > 0 {
		o.Set("from", froms[0])
	} else {
		o.Set("from", imposter.NewObject().Set("address", "").Set("name", ""))
	}
	o.Set("to", firstAddresses(h["To"]))
	o.Set("cc", firstAddresses(h["Cc"]))
	o.Set("bcc", firstAddresses(h["Bcc"]))
	dec := new(mime.WordDecoder)
	subject, err := dec.DecodeHeader(h.Get("Subject"))
	if err != nil {
		subject = h.Get("Subject")
	}
	o.Set("subject", subject)
	o.Set("priority", priority(h))
	o.Set("references", idList(h.Get("References")))
	o.Set("inReplyTo", idList(h.Get("In-Reply-To")))
	var text, html strings.Builder
	atts := []any{}
	walkPart(h.Get, m.Body, &text, &html, &atts, 0)
	// Line breaks as mountebank's parser gives them: \n.
	o.Set("text", strings.TrimSpace(strings.ReplaceAll(text.String(), "\r\n", "\n")))
	o.Set("html", strings.TrimSpace(strings.ReplaceAll(html.String(), "\r\n", "\n")))
	o.Set("attachments", atts)
	return o
}

// addresses parses an address header into {address, name} objects.
func addresses(v string) []any {
	out := []any{}
	if strings.TrimSpace(v) == "" {
		return out
	}
	list, err := (&mail.AddressParser{WordDecoder: new(mime.WordDecoder)}).ParseList(v)
	if err != nil {
		return append(out, imposter.NewObject().Set("address", strings.TrimSpace(v)).Set("name", ""))
	}
	for _, a := range list {
		out = append(out, imposter.NewObject().Set("address", a.Address).Set("name", a.Name))
	}
	return out
}

// firstAddresses is an address header as mountebank records it: the
// first address of each header line (its parser's value[0]; a line
// naming several records one).
func firstAddresses(lines []string) []any {
	out := []any{}
	for _, l := range lines {
		if as := addresses(l); len(as) > 0 {
			out = append(out, as[0])
		}
	}
	return out
}

func priority(h mail.Header) string {
	switch p := strings.TrimSpace(h.Get("X-Priority")); {
	case strings.HasPrefix(p, "1"), strings.HasPrefix(p, "2"):
		return "high"
	case strings.HasPrefix(p, "4"), strings.HasPrefix(p, "5"):
		return "low"
	}
	switch strings.ToLower(strings.TrimSpace(h.Get("Importance"))) {
	case "high":
		return "high"
	case "low":
		return "low"
	}
	return "normal"
}

func idList(v string) []any {
	out := []any{}
	for _, f := range strings.Fields(v) {
		out = append(out, f)
	}
	return out
}

// walkPart gathers a part's text, html and attachments, into multipart
// bodies (at most 8 deep).
func walkPart(header func(string) string, body io.Reader, text, html *strings.Builder, atts *[]any, depth int) {
	ctype, params, err := mime.ParseMediaType(header("Content-Type"))
	if err != nil {
		ctype = "text/plain"
	}
	if strings.HasPrefix(ctype, "multipart/") && depth < 8 {
		mr := multipart.NewReader(body, params["boundary"])
		for {
			p, err := mr.NextRawPart()
			if err != nil {
				return
			}
			walkPart(p.Header.Get, p, text, html, atts, depth+1)
		}
	}
	content, _ := io.ReadAll(io.LimitReader(decoded(header("Content-Transfer-Encoding"), body), MaxBodyBytes))
	disp, dparams, _ := mime.ParseMediaType(header("Content-Disposition"))
	name := dparams["filename"]
	if name == "" {
		name = params["name"]
	}
	switch {
	case disp != "attachment" && name == "" && ctype == "text/plain":
		text.Write(content)
	case disp != "attachment" && name == "" && ctype == "text/html":
		html.Write(content)
	default:
		*atts = append(*atts, imposter.NewObject().Set("type", "attachment").Set("contentType", ctype).
			Set("filename", name).Set("size", float64(len(content))).
			Set("content", imposter.NewObject().Set("type", "Buffer").Set("data", base64.StdEncoding.EncodeToString(content))))
	}
}

func decoded(enc string, r io.Reader) io.Reader {
	switch strings.ToLower(strings.TrimSpace(enc)) {
	case "base64":
		return base64.NewDecoder(base64.StdEncoding, r) // it skips the line breaks
	case "quoted-printable":
		return quotedprintable.NewReader(r)
	}
	return r
}
