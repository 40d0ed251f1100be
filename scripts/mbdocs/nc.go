package main

import (
	"fmt"
	"io"
	"net"
	"net/mail"
	"net/smtp"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The pages' shell commands talk to tcp imposters with nc. Rather than
// need a netcat (whose flavours differ in when they hang up), mbdocs is
// its own: the exec steps find it first on their PATH under the name nc.
// It takes "nc HOST PORT" (other flags are ignored), sends its input,
// and prints what comes back until the server has been quiet for a
// while: a tcp imposter answers and keeps the connection open, so there
// is no end to wait for.

// ncQuiet is how long nc waits for more after the last bytes it got;
// ncFirst how long for the first.
const (
	ncQuiet = 300 * time.Millisecond
	ncFirst = 2 * time.Second
)

// runNC is mbdocs started as nc.
func runNC(args []string) int {
	var pos []string
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			pos = append(pos, a)
		}
	}
	if len(pos) != 2 {
		fmt.Fprintln(os.Stderr, "nc (mbdocs): want HOST PORT")
		return 2
	}
	c, err := net.DialTimeout("tcp", net.JoinHostPort(pos[0], pos[1]), 5*time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, "nc (mbdocs):", err)
		return 1
	}
	defer c.Close()
	if _, err := io.Copy(c, os.Stdin); err != nil {
		fmt.Fprintln(os.Stderr, "nc (mbdocs):", err)
		return 1
	}
	wait := ncFirst
	buf := make([]byte, 64<<10)
	for {
		_ = c.SetReadDeadline(time.Now().Add(wait))
		n, err := c.Read(buf)
		os.Stdout.Write(buf[:n])
		if err != nil {
			return 0
		}
		wait = ncQuiet
	}
}

// ncDir makes a directory holding nc, a link to this program, for the
// exec steps' PATH.
func ncDir(cwd string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cwd, ".bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return dir, os.Symlink(self, filepath.Join(dir, "nc"))
}

// smtpStep sends a page's message to the smtp imposter on the step's
// port, from and to the addresses its headers name.
func smtpStep(st step) []string {
	msg := strings.ReplaceAll(strings.ReplaceAll(st.text, "\r\n", "\n"), "\n", "\r\n") + "\r\n"
	m, err := mail.ReadMessage(strings.NewReader(msg))
	if err != nil {
		return []string{"smtp: the page's message does not parse: " + err.Error()}
	}
	from, err := mail.ParseAddress(m.Header.Get("From"))
	if err != nil {
		return []string{"smtp: From: " + err.Error()}
	}
	to, err := mail.ParseAddressList(m.Header.Get("To"))
	if err != nil {
		return []string{"smtp: To: " + err.Error()}
	}
	rcpts := make([]string, len(to))
	for i, a := range to {
		rcpts[i] = a.Address
	}
	if err := sendPlain(net.JoinHostPort(nextHost(), st.attr("port")), from.Address, rcpts, msg); err != nil {
		return []string{"smtp: " + err.Error()}
	}
	return nil
}

// sendPlain sends a message without STARTTLS, which mountebank's server
// offers with a built-in certificate long expired.
func sendPlain(addr, from string, rcpts []string, msg string) error {
	c, err := smtp.Dial(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Hello("localhost"); err != nil {
		return err
	}
	if err := c.Mail(from); err != nil {
		return err
	}
	for _, r := range rcpts {
		if err := c.Rcpt(r); err != nil {
			return err
		}
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := io.WriteString(w, msg); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return c.Quit()
}
