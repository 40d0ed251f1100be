package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/core/node"
	"github.com/fenceline/fenceline/core/transport"
	"github.com/fenceline/fenceline/realnet"
)

// memberNode is one in-process node founding its cluster, behind its API
// on a loopback address.
type memberNode struct {
	nd   *realnet.Node
	keys transport.Keys
	http string
}

func startMemberNode(t *testing.T, ip string) *memberNode {
	return startMemberNodeWith(t, ip, node.Config{})
}

// startMemberNodeWith is startMemberNode with the core configured so.
func startMemberNodeWith(t *testing.T, ip string, core node.Config) *memberNode {
	keys := transport.Keys{Control: realnet.GenerateKey(), Data: realnet.GenerateKey()}
	ln, err := net.Listen("tcp", ip+":0")
	require.NoError(t, err)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	nd, err := realnet.OpenNode(realnet.NodeConfig{Name: "n1", DataDir: t.TempDir(), PeerAddr: ip + ":0", HTTP: ln.Addr().String(),
		Keys: keys, Bootstrap: true, Log: log, Core: core})
	require.NoError(t, err)
	srv := &http.Server{Handler: newAPI(nd, keys, "n1", ln.Addr().String(), log), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); _ = nd.Close() })
	require.Eventually(t, func() bool {
		var leads bool
		_ = nd.Do(context.Background(), func(c *node.Node) { leads = c.Consensus.IsLeader() })
		return leads
	}, 10*time.Second, 20*time.Millisecond, "n1 leads")
	return &memberNode{nd: nd, keys: keys, http: ln.Addr().String()}
}

func (m *memberNode) members(t *testing.T) []string {
	var names []string
	require.NoError(t, m.nd.Do(context.Background(), func(c *node.Node) {
		ms := c.Consensus.Membership()
		for _, v := range append(ms.Voters, ms.Learners...) {
			names = append(names, v.Name)
		}
	}))
	return names
}

// index is the membership index m has applied.
func (m *memberNode) index(t *testing.T) uint64 {
	var i uint64
	require.NoError(t, m.nd.Do(context.Background(), func(c *node.Node) { i = c.Consensus.Membership().Index }))
	return i
}

// attestJoin is the control key's attestation of r (at r.Index), made at.
func (m *memberNode) attestJoin(t *testing.T, keys transport.Keys, at time.Time, r joinRequest) string {
	return attestAt(t, keys, at, transport.ActJoin, joinFields(r)...)
}

// removal is the control key's attestation of name's removal at index.
func (m *memberNode) removal(t *testing.T, keys transport.Keys, at time.Time, name string, index uint64) string {
	return attestAt(t, keys, at, transport.ActRemove, name, fmt.Sprint(index))
}

func (m *memberNode) join(t *testing.T, body joinRequest) (int, string) {
	b, _ := json.Marshal(body)
	return call("POST", "http://"+m.http+"/_cluster/members", string(b))
}

func (m *memberNode) remove(t *testing.T, name string, index uint64, att string) (int, string) {
	req, _ := http.NewRequest("DELETE", fmt.Sprintf("http://%s/_cluster/members/%s?index=%d", m.http, name, index), nil)
	if att != "" {
		req.Header.Set(attestationHeader, att)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func attestAt(t *testing.T, keys transport.Keys, at time.Time, act string, fields ...string) string {
	var nonce [transport.AttestNonceSize]byte
	copy(nonce[:], realnet.GenerateKey())
	a, err := keys.Attest(act, fields, at, nonce)
	require.NoError(t, err)
	return a.String()
}

// A join's attestation is good once, for a while, and for one
// membership: a captured join replayed is refused, by the node that saw
// it and, once the membership has changed, by any node (a join attested
// at an older index); so are attestations made too long ago or too far
// in the future, for another name, address or index, or under another
// key.
func TestJoinAttestationIsFreshAndGoodOnce(t *testing.T) {
	m := startMemberNode(t, "127.0.0.41")
	req := joinRequest{Name: "n2", Peer: "127.0.0.42:1", HTTP: "127.0.0.42:2", Index: m.index(t)}
	good := req
	good.Attestation = m.attestJoin(t, m.keys, time.Now(), req)
	code, body := m.join(t, good)
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, m.members(t), "n2")

	code, body = m.join(t, good)
	require.Equal(t, http.StatusForbidden, code, "a replayed join: %s", body)
	require.Contains(t, body, "already used")

	// Attestations for n3 that must not add it.
	n3 := joinRequest{Name: "n3", Peer: "127.0.0.43:1", HTTP: "127.0.0.43:2", Index: m.index(t)}
	other := transport.Keys{Control: realnet.GenerateKey(), Data: m.keys.Data}
	moved := n3
	moved.Peer = "127.0.0.99:1"
	later := n3
	later.Index++
	for name, att := range map[string]string{
		"made 7 minutes ago":        m.attestJoin(t, m.keys, time.Now().Add(-7*time.Minute), n3),
		"made 2 minutes from now":   m.attestJoin(t, m.keys, time.Now().Add(2*time.Minute), n3),
		"for another peer address":  m.attestJoin(t, m.keys, time.Now(), moved),
		"for another index":         m.attestJoin(t, m.keys, time.Now(), later),
		"for a removal":             m.removal(t, m.keys, time.Now(), n3.Name, n3.Index),
		"under another control key": m.attestJoin(t, other, time.Now(), n3),
		"the old form, a bare MAC":  hex.EncodeToString(bytes.Repeat([]byte{1}, 32)),
		"none":                      "",
	} {
		r := n3
		r.Attestation = att
		code, body := m.join(t, r)
		require.Equal(t, http.StatusForbidden, code, "%s: %s", name, body)
	}
	// Attested at an index the node has not reached: ask again later.
	later.Attestation = m.attestJoin(t, m.keys, time.Now(), later)
	code, body = m.join(t, later)
	require.Equal(t, http.StatusServiceUnavailable, code, body)
	require.Contains(t, body, `"reason":"behind"`)

	// Four minutes old, from a clock a little behind: still good.
	r := joinRequest{Name: "n4", Peer: "127.0.0.44:1", HTTP: "127.0.0.44:2", Index: m.index(t)}
	r.Attestation = m.attestJoin(t, m.keys, time.Now().Add(-4*time.Minute), r)
	code, body = m.join(t, r)
	require.Equal(t, http.StatusOK, code, body)
	require.NotContains(t, m.members(t), "n3")

	// n4 removed, its join sent again as another member would see it
	// (the same request, a nonce this node never saw): the membership
	// has changed since it was attested, so it adds nothing, and the
	// answer names the index to attest against.
	code, body = removeMember(t, m.http, writeKey(t, m.keys.Control), "n4")
	require.Equal(t, http.StatusOK, code, body)
	require.NotContains(t, m.members(t), "n4")
	r.Attestation = m.attestJoin(t, m.keys, time.Now(), r)
	code, body = m.join(t, r)
	require.Equal(t, http.StatusConflict, code, body)
	var stale staleRefusal
	require.NoError(t, json.Unmarshal([]byte(body), &stale))
	require.Equal(t, "stale", stale.Reason)
	require.Equal(t, m.index(t), stale.Index)
	require.NotContains(t, m.members(t), "n4")
}

// A removal needs the control key's attestation of exactly that removal
// from the membership at hand, good once.
func TestRemoveNeedsAnAttestation(t *testing.T) {
	m := startMemberNode(t, "127.0.0.45")
	r := joinRequest{Name: "n2", Peer: "127.0.0.46:1", HTTP: "127.0.0.46:2", Index: m.index(t)}
	r.Attestation = m.attestJoin(t, m.keys, time.Now(), r)
	code, body := m.join(t, r)
	require.Equal(t, http.StatusOK, code, body)

	idx := m.index(t)
	code, body = m.remove(t, "n2", idx, "")
	require.Equal(t, http.StatusForbidden, code, body)
	require.Contains(t, body, attestationHeader)
	other := transport.Keys{Control: realnet.GenerateKey(), Data: m.keys.Data}
	for name, att := range map[string]string{
		"for another name":          m.removal(t, m.keys, time.Now(), "n3", idx),
		"for another index":         m.removal(t, m.keys, time.Now(), "n2", idx+1),
		"a join's":                  m.attestJoin(t, m.keys, time.Now(), r),
		"made 10 minutes ago":       m.removal(t, m.keys, time.Now().Add(-10*time.Minute), "n2", idx),
		"under another control key": m.removal(t, other, time.Now(), "n2", idx),
		"garbage":                   "please",
	} {
		code, body := m.remove(t, "n2", idx, att)
		require.Equal(t, http.StatusForbidden, code, "%s: %s", name, body)
	}
	require.Contains(t, m.members(t), "n2", "nothing removed it")

	att := m.removal(t, m.keys, time.Now(), "n2", idx)
	code, body = m.remove(t, "n2", idx, att)
	require.Equal(t, http.StatusOK, code, body)
	require.NotContains(t, m.members(t), "n2")
	code, body = m.remove(t, "n2", idx, att)
	require.Equal(t, http.StatusForbidden, code, "replayed: %s", body)

	// n2 back, and its removal sent again as another member would see
	// it (a nonce this node never saw): the membership has changed
	// since, so it removes nothing.
	r.Index = m.index(t)
	r.Attestation = m.attestJoin(t, m.keys, time.Now(), r)
	code, body = m.join(t, r)
	require.Equal(t, http.StatusOK, code, body)
	code, body = m.remove(t, "n2", idx, m.removal(t, m.keys, time.Now(), "n2", idx))
	require.Equal(t, http.StatusConflict, code, body)
	require.Contains(t, body, `"reason":"stale"`)
	require.Contains(t, m.members(t), "n2")
	code, body = m.remove(t, "n2", 0, m.removal(t, m.keys, time.Now(), "n2", 0))
	require.Equal(t, http.StatusConflict, code, "no index given is the oldest: %s", body)
	req, _ := http.NewRequest("DELETE", "http://"+m.http+"/_cluster/members/n2", nil)
	req.Header.Set(attestationHeader, m.removal(t, m.keys, time.Now(), "n2", idx))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "no ?index=")
}

// `node remove` makes the attestation from the key file and calls the
// member, attesting again at the membership index the member answers
// with; -print only prints it, for the index given.
func TestRemoveSubcommand(t *testing.T) {
	m := startMemberNode(t, "127.0.0.47")
	r := joinRequest{Name: "n2", Peer: "127.0.0.48:1", HTTP: "127.0.0.48:2", Index: m.index(t)}
	r.Attestation = m.attestJoin(t, m.keys, time.Now(), r)
	code, body := m.join(t, r)
	require.Equal(t, http.StatusOK, code, body)
	keyFile := writeKey(t, m.keys.Control)

	var out, errOut bytes.Buffer
	require.Equal(t, 2, runAdmin(removeCall, []string{"-print", "-control-key-file", keyFile, "n2"}, &out, &errOut), "-print needs -index")
	require.Contains(t, errOut.String(), "-print needs -index")
	idx := m.index(t)
	require.Equal(t, 0, runAdmin(removeCall, []string{"-print", "-index", fmt.Sprint(idx), "-control-key-file", keyFile, "n2"}, &out, &errOut), errOut.String())
	att, err := transport.ParseAttestation(strings.TrimSpace(out.String()))
	require.NoError(t, err)
	require.NoError(t, m.keys.CheckAttestation(transport.ActRemove, []string{"n2", fmt.Sprint(idx)}, att, time.Now()))

	out.Reset()
	require.Equal(t, 0, runAdmin(removeCall, []string{"-control-key-file", keyFile, "-via", m.http, "n2"}, &out, &errOut), errOut.String())
	require.Contains(t, out.String(), "n2")
	require.NotContains(t, m.members(t), "n2")

	r = joinRequest{Name: "n3", Peer: "127.0.0.48:3", HTTP: "127.0.0.48:4", Index: m.index(t)}
	r.Attestation = m.attestJoin(t, m.keys, time.Now(), r)
	code, body = m.join(t, r)
	require.Equal(t, http.StatusOK, code, body)
	code, body = removeMember(t, m.http, keyFile, "n3")
	require.Equal(t, http.StatusOK, code, body)
	require.NotContains(t, m.members(t), "n3")

	wrong := writeKey(t, realnet.GenerateKey())
	errOut.Reset()
	require.Equal(t, 1, runAdmin(removeCall, []string{"-control-key-file", wrong, "-via", m.http, "n1"}, &out, &errOut))
	require.Contains(t, errOut.String(), "403")
	require.Contains(t, m.members(t), "n1")
	require.Equal(t, 2, runAdmin(removeCall, []string{"-control-key-file", keyFile}, &out, &errOut), "no name")
	require.Equal(t, 2, runAdmin(removeCall, []string{"-control-key-file", filepath.Join(t.TempDir(), "absent"), "n1"}, &out, &errOut))
}

// writeKey writes key, hex, to a file of its own, and returns its path.
func writeKey(t *testing.T, key []byte) string {
	f := filepath.Join(t.TempDir(), "control.key")
	require.NoError(t, os.WriteFile(f, []byte(hex.EncodeToString(key)+"\n"), 0o600))
	return f
}

// At its bound the guard refuses a good attestation with 503 and
// Retry-After (fail closed), rather than forget one that could be
// replayed.
func TestAttestationGuardFull(t *testing.T) {
	m := startMemberNodeWith(t, "127.0.0.49", node.Config{MaxAttestations: 1})
	for i, want := range []int{http.StatusOK, http.StatusServiceUnavailable} {
		r := joinRequest{Name: "n" + string(rune('2'+i)), Peer: "127.0.0.50:1", HTTP: "127.0.0.50:2", Index: m.index(t)}
		r.Attestation = m.attestJoin(t, m.keys, time.Now(), r)
		b, _ := json.Marshal(r)
		resp, err := http.Post("http://"+m.http+"/_cluster/members", "application/json", bytes.NewReader(b))
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, want, resp.StatusCode, string(body))
		if want == http.StatusServiceUnavailable {
			require.Equal(t, "60", resp.Header.Get("Retry-After"))
		}
	}
}

// The accepted keys of a rotation are read from their files, checked,
// and never generated.
func TestLoadAcceptedKeys(t *testing.T) {
	dir := t.TempDir()
	k := transport.Keys{Control: realnet.GenerateKey(), Data: realnet.GenerateKey()}
	next := filepath.Join(dir, "next.key")
	require.NoError(t, os.WriteFile(next, []byte(hex.EncodeToString(realnet.GenerateKey())), 0o600))
	require.NoError(t, loadAcceptedKeys("", next, &k))
	require.Len(t, k.AcceptData, transport.KeySize)
	require.Nil(t, k.AcceptControl)
	require.ErrorIs(t, loadAcceptedKeys(filepath.Join(dir, "absent"), "", &k), errUsage)
	_, err := os.Stat(filepath.Join(dir, "absent"))
	require.True(t, os.IsNotExist(err), "not generated")
	short := filepath.Join(dir, "short.key")
	require.NoError(t, os.WriteFile(short, []byte("abc"), 0o600))
	require.ErrorIs(t, loadAcceptedKeys(short, "", &k), errUsage)
}

// removeMember removes name through the member at httpAddr as `node
// remove` does, with the control key in keyFile: for the tests that
// remove members (the cluster helpers keep control.key in each proc's
// dir).
func removeMember(t testing.TB, httpAddr, keyFile, name string) (int, string) {
	t.Helper()
	b, err := os.ReadFile(keyFile)
	require.NoError(t, err)
	control, err := parseKey(keyFile, b)
	require.NoError(t, err)
	code, body, err := askAdmin(removeCall, control, httpAddr, []string{name}, 0)
	require.NoError(t, err)
	return code, body
}
