//go:build unix

package imposterhttp

import "syscall"

type peekResult int

const (
	peekNothing peekResult = iota // open, nothing to read
	peekData                      // bytes are waiting
	peekClosed                    // the peer closed or the socket failed
)

// peekState looks at a socket without reading from it or waiting: a
// non-blocking MSG_PEEK of one byte. ok is false when the socket could
// not be asked.
func peekState(sc syscall.Conn) (peekResult, bool) {
	rc, err := sc.SyscallConn()
	if err != nil {
		return peekClosed, false
	}
	var res peekResult
	var buf [1]byte
	err = rc.Read(func(fd uintptr) bool {
		n, _, rerr := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK:
			res = peekNothing
		case rerr != nil || n == 0:
			res = peekClosed
		default:
			res = peekData
		}
		return true // never wait for readiness
	})
	return res, err == nil
}
