package main

import (
	"bytes"
	"context"
	cryptorand "crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/fenceline/fenceline/core/consensus"
	"github.com/fenceline/fenceline/core/fleet"
	"github.com/fenceline/fenceline/core/node"
	"github.com/fenceline/fenceline/core/transport"
	"github.com/fenceline/fenceline/dial"
	"github.com/fenceline/fenceline/realnet"
)

// joinTimeout bounds how long a new node keeps asking to be added.
const joinTimeout = 30 * time.Second

// joinCluster asks the member at via to add this node as a learner, with
// the control key's attestation (askMember), and introduces the node to
// the members the answer names (it must reach the leader before it has
// applied the membership that adds it). A node that is already a member
// — a restart — asks nothing.
//
// In a fleet, group is the data group the node was started for: a member
// of another group (or of no fleet) refuses it, since the node would
// otherwise serve the flows of a group it was not told it is in.
func joinCluster(ctx context.Context, nd *realnet.Node, keys transport.Keys, name, peer, httpAddr, via string, group *int, log *slog.Logger) error {
	var member bool
	if err := nd.Do(ctx, func(c *node.Node) { member = c.Consensus.Membership().Index > 0 }); err != nil {
		return err
	}
	if member {
		log.Info("already a member; not joining again", "via", via)
		return nil
	}
	return askMember(ctx, nd, via, "/_cluster/members", "joined as a learner", func(index uint64) ([]byte, error) {
		req := joinRequest{Name: name, Peer: peer, HTTP: httpAddr, Index: index, Group: group}
		att, err := attest(keys, transport.ActJoin, joinFields(req)...)
		if err != nil {
			return nil, err
		}
		req.Attestation = att.String()
		return json.Marshal(req)
	}, log)
}

// askMember posts a body made afresh for each try (with a fresh
// attestation: a member admits each one once) to path at the member at
// via until it answers, and introduces the node to the members the
// answer names (it must reach them before it has applied a membership
// that does), logging what was done. The body is attested against the
// membership index given, 0 at first: a member at a later one refuses it
// as stale with its own, and the next try is attested at that. Any other
// refusal (400, 403, 409) ends it at once; anything else is retried with
// backoff until joinTimeout.
func askMember(ctx context.Context, nd *realnet.Node, via, path, what string, body func(index uint64) ([]byte, error), log *slog.Logger) error {
	url := via
	if !strings.Contains(url, "://") {
		url = "http://" + url
	}
	url = strings.TrimSuffix(url, "/") + path
	client := memberClient(15 * time.Second)
	deadline := time.Now().Add(joinTimeout)
	backoff := 100 * time.Millisecond
	var index uint64
	for {
		b, err := body(index)
		if err != nil {
			return err
		}
		ans, retry, err := askToJoin(ctx, client, url, b)
		var stale *staleMembershipError
		if errors.As(err, &stale) && stale.index > index && time.Now().Before(deadline) {
			index = stale.index // attest again at the member's: at once
			continue
		}
		if err == nil {
			peers := map[dial.NodeID]string{}
			for _, m := range ans.Members {
				peers[dial.IDFromName(m.Name)] = m.Peer
			}
			log.Info(what, "via", via, "members", len(ans.Members))
			return nd.Introduce(ctx, peers)
		}
		if !retry || time.Now().After(deadline) {
			return err
		}
		log.Warn("not answered yet; retrying", "via", via, "path", path, "err", err, "in", backoff)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return ctx.Err()
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// addToFleet asks the member at via (of any group) to add group, which
// this node has just founded alone, to the running fleet, with the
// control key's attestation (POST /_cluster/fleet/groups), and
// introduces the node to the control group's members the answer names:
// their leader adds it as a learner once the directory names the group.
// A group added already with this node as its voter is answered as done,
// so a restart asks again harmlessly. A refusal (a bad attestation, a
// group out of turn) ends it (askMember).
func addToFleet(ctx context.Context, nd *realnet.Node, keys transport.Keys, name, peer, httpAddr, via string, group int, log *slog.Logger) error {
	var mIdx uint64
	for wait := time.Now().Add(joinTimeout); mIdx == 0; {
		// The group's founding membership, as its one voter applied it.
		if err := nd.Do(ctx, func(c *node.Node) { mIdx = c.Consensus.Membership().Index }); err != nil {
			return err
		}
		if mIdx == 0 {
			if time.Now().After(wait) {
				return fmt.Errorf("group %d's raft group has applied no membership after %v", group, joinTimeout)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return askMember(ctx, nd, via, "/_cluster/fleet/groups", fmt.Sprintf("the fleet added group %d", group), func(uint64) ([]byte, error) {
		req := addGroupRequest{Name: name, Peer: peer, HTTP: httpAddr, Group: group, MIdx: mIdx}
		att, err := attest(keys, transport.ActAddGroup, node.AddGroupFields(group, fleet.Group{MIdx: mIdx, Voters: []fleet.Member{{Name: name, Peer: peer, HTTP: httpAddr}}})...)
		if err != nil {
			return nil, err
		}
		req.Attestation = att.String()
		return json.Marshal(req)
	}, log)
}

// staleMembershipError is a member's refusal of a join attested against
// an older membership index than its own, index.
type staleMembershipError struct{ index uint64 }

func (e *staleMembershipError) Error() string {
	return fmt.Sprintf("attested against an older membership than the member's, at %d", e.index)
}

func askToJoin(ctx context.Context, client *http.Client, url string, body []byte) (joinAnswer, bool, error) {
	var ans joinAnswer
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return ans, false, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return ans, true, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	switch {
	case resp.StatusCode == http.StatusOK:
		if err := json.Unmarshal(b, &ans); err != nil {
			return ans, false, fmt.Errorf("join answer: %w", err)
		}
		return ans, false, nil
	case resp.StatusCode == http.StatusConflict:
		var r staleRefusal
		if json.Unmarshal(b, &r) == nil && r.Reason == "stale" && r.Index > 0 {
			return ans, true, &staleMembershipError{r.Index}
		}
		return ans, false, errors.New(strings.TrimSpace(string(b)))
	case resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusBadRequest:
		return ans, false, errors.New(strings.TrimSpace(string(b)))
	default:
		return ans, true, fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
}

// --- attestations

// attest makes the control key's attestation of an act (transport.Attest)
// now, with a fresh random nonce.
func attest(keys transport.Keys, act string, fields ...string) (transport.Attestation, error) {
	var nonce [transport.AttestNonceSize]byte
	_, _ = cryptorand.Read(nonce[:]) // never fails (crypto/rand panics instead)
	return keys.Attest(act, fields, time.Now(), nonce)
}

// attestationHeader carries a removal's or a resize's attestation.
const attestationHeader = "X-Fenceline-Attestation"

// adminRefused answers an admin act the node refused for its attestation
// (node/admin.go), and reports whether it did: 403 for one that is not
// the control key's word, has expired or was taken before; 503 while
// the node remembers too many to take another; 409 "stale" for one made
// against an older version than the node holds, and 503 "behind" for a
// newer one, each with the version the node holds (the directory's epoch
// for a resize, the membership's index otherwise), to attest again at.
func (a *api) adminRefused(w http.ResponseWriter, act, what string, err error) bool {
	var v *node.VersionError
	switch {
	case errors.Is(err, node.ErrNotAttested):
		// Who may join, who is removed, how the fleet is spread: the
		// control key's word, never the caller's.
		a.log.Warn("refused an attestation", "act", act, "of", what, "err", err)
		fail(w, http.StatusForbidden, "forbidden", "the attestation to %s %q: %v", act, what, err)
	case errors.Is(err, transport.ErrAttestGuardFull):
		w.Header().Set("Retry-After", "60")
		fail(w, http.StatusServiceUnavailable, "busy", "%v", err)
	case errors.As(err, &v):
		ans := staleRefusal{failure: failure{"stale", err.Error()}}
		code := http.StatusConflict
		if errors.Is(err, node.ErrAttestationAhead) {
			ans.Reason, code = "behind", http.StatusServiceUnavailable
			w.Header().Set("Retry-After", "1")
		}
		if act == transport.ActResize {
			ans.Epoch = v.Now
		} else {
			ans.Index = v.Now
		}
		writeJSON(w, code, ans)
	default:
		return false
	}
	return true
}

// --- the cluster API's membership calls

// joinRequest is a node asking to join: who it is, where it listens, the
// membership index it asks to be added to, and the control key's
// attestation of exactly that (transport.Attestation's text form).
type joinRequest struct {
	Name        string `json:"name"`
	Peer        string `json:"peer"`
	HTTP        string `json:"http"`
	Index       uint64 `json:"index"`
	Attestation string `json:"attestation"`
	// Group is the fleet's data group the node joins; nil outside a
	// fleet.
	Group *int `json:"fleetGroup,omitempty"`
}

type joinAnswer struct {
	Members []memberJSON `json:"members"`
}

// joinFields are what a join's attestation vouches for
// (node.JoinFields).
func joinFields(req joinRequest) []string {
	return node.JoinFields(joinMember(req), req.Index)
}

// joinMember is the member a join asks to add.
func joinMember(req joinRequest) consensus.Member {
	m := consensus.NewMember(req.Name, req.Peer)
	m.HTTP = req.HTTP // attested with the rest
	return m
}

// join adds the node a request names as a learner (node.Node.Join), with
// the control key's attestation of exactly that node, at exactly the
// membership index it names: 200 with the members once it is one (or
// was already), the node checks the rest (adminRefused).
func (a *api) join(w http.ResponseWriter, r *http.Request) {
	var req joinRequest
	if !decode(w, r, &req) {
		return
	}
	if req.Name == "" || req.Peer == "" {
		fail(w, http.StatusBadRequest, "bad_request", "a join names the node and its peer address")
		return
	}
	group := node.NoGroup
	if req.Group != nil {
		group = *req.Group
	}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	_, err := realnet.Await(ctx, a.nd, func(c *node.Node, done func(struct{}, error)) {
		c.Join(joinMember(req), group, req.Index, req.Attestation, func(err error) { done(struct{}{}, err) })
	})
	switch {
	case a.adminRefused(w, transport.ActJoin, req.Name, err):
		return
	case errors.Is(err, node.ErrWrongGroup):
		fail(w, http.StatusBadRequest, "bad_request", "%v", err)
		return
	case err != nil:
		failErr(w, err)
		return
	}
	a.log.Info("joined", "name", req.Name, "peer", req.Peer, "http", req.HTTP)
	var ans joinAnswer
	_ = a.nd.Do(ctx, func(c *node.Node) {
		ms := c.Consensus.Membership()
		ans.Members = membersJSON(append(append([]consensus.Member(nil), ms.Voters...), ms.Learners...))
	})
	writeJSON(w, http.StatusOK, ans)
}

// remove removes a member (node.Node.Remove). It takes the control key's
// attestation of the removal of exactly that name from the membership at
// ?index=, in the X-Fenceline-Attestation header, good once, for
// AttestValidity, and only while the membership is at that index; an
// operator makes one with the node binary (remove.go):
//
//	node remove -control-key-file control.key -via 127.0.0.1:2525 n3
//
// or prints it for another client with -print, given the index (the
// status's m_idx):
//
//	curl -X DELETE -H "X-Fenceline-Attestation: $(node remove -print -index 7 -control-key-file control.key n3)" \
//	    'http://127.0.0.1:2525/_cluster/members/n3?index=7'
func (a *api) remove(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if r.Header.Get(attestationHeader) == "" {
		fail(w, http.StatusForbidden, "forbidden",
			"a removal needs the control key's attestation in the %s header (node remove -control-key-file F -via ADDR %s)", attestationHeader, name)
		return
	}
	at, err := strconv.ParseUint(r.URL.Query().Get("index"), 10, 64)
	if err != nil {
		fail(w, http.StatusBadRequest, "bad_request", "a removal names the membership index it was attested against (?index=)")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	_, err = realnet.Await(ctx, a.nd, func(c *node.Node, done func(struct{}, error)) {
		c.Remove(name, at, r.Header.Get(attestationHeader), func(err error) { done(struct{}{}, err) })
	})
	switch {
	case a.adminRefused(w, transport.ActRemove, name, err):
		return
	case errors.Is(err, node.ErrWrongGroup):
		fail(w, http.StatusBadRequest, "bad_request", "%v", err)
		return
	case err != nil:
		failErr(w, err)
		return
	}
	a.log.Info("removed a member", "name", name)
	writeJSON(w, http.StatusOK, map[string]string{"removed": name})
}

// resizeRequest is an operator's resize: the number of groups the
// fleet's partitions should be spread over, and the epoch of the
// directory the attestation was made against.
type resizeRequest struct {
	Groups int    `json:"groups"`
	Epoch  uint64 `json:"epoch"`
}

// staleRefusal refuses an act whose attestation checked but was made
// against another version of what it changes than this node holds
// (reasons "stale": an older one, and "behind": a newer one than it has
// seen), with the version it holds: the directory's epoch for a resize,
// the membership's index for a join or a removal. Attest again at it.
type staleRefusal struct {
	failure
	Epoch uint64 `json:"epoch,omitempty"`
	Index uint64 `json:"index,omitempty"`
}

// resize sets the fleet's target (node.Node.Resize), with the control
// key's attestation of exactly that number at exactly that directory
// epoch in the X-Fenceline-Attestation header (node resize). The node
// checks it (an attestation is good for one change of the fleet,
// wherever it is sent). 200 once the target is committed; the moves
// follow, and the status's fleet.directory shows them.
func (a *api) resize(w http.ResponseWriter, r *http.Request) {
	var req resizeRequest
	if !decode(w, r, &req) {
		return
	}
	text := r.Header.Get(attestationHeader)
	if text == "" {
		fail(w, http.StatusForbidden, "forbidden",
			"a resize needs the control key's attestation in the %s header (node resize -control-key-file F -via ADDR %d)", attestationHeader, req.Groups)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	_, err := realnet.Await(ctx, a.nd, func(c *node.Node, done func(struct{}, error)) {
		c.Resize(req.Groups, req.Epoch, text, func(err error) { done(struct{}{}, err) })
	})
	switch {
	case a.adminRefused(w, transport.ActResize, fmt.Sprint(req.Groups), err):
	case errors.Is(err, fleet.ErrInvalid):
		fail(w, http.StatusBadRequest, "bad_request", "%v", err)
	case errors.Is(err, node.ErrResizeRaced):
		fail(w, http.StatusConflict, "raced", "%v", err)
	case errors.Is(err, node.ErrNoDirectory):
		fail(w, http.StatusServiceUnavailable, "no_directory", "%v", err)
	case err != nil:
		failErr(w, err)
	default:
		a.log.Info("resized the fleet", "groups", req.Groups)
		writeJSON(w, http.StatusOK, map[string]int{"groups": req.Groups})
	}
}

// addGroupRequest is a new group's founder asking the fleet to add its
// group: who it is, where it listens, the group's number and founding
// membership index, and the control key's attestation of exactly that.
type addGroupRequest struct {
	Name        string `json:"name"`
	Peer        string `json:"peer"`
	HTTP        string `json:"http"`
	Group       int    `json:"group"`
	MIdx        uint64 `json:"mIdx"`
	Attestation string `json:"attestation"`
}

// addGroup adds a group to the running fleet (node.Node.AddGroup),
// founded by the node the request names, with the control key's
// attestation of the request. 200 with the control group's members once
// the directory names the group (or already did, with that founder);
// the group holds nothing until a resize moves partitions to it.
func (a *api) addGroup(w http.ResponseWriter, r *http.Request) {
	var req addGroupRequest
	if !decode(w, r, &req) {
		return
	}
	if req.Name == "" || req.Peer == "" || req.Group < 0 || req.MIdx == 0 {
		fail(w, http.StatusBadRequest, "bad_request", "adding a group names its founder, the founder's peer address, the group's number and its membership index")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	var inFleet bool
	if err := a.nd.Do(ctx, func(c *node.Node) { _, inFleet = c.FleetGroup() }); err != nil {
		failErr(w, err)
		return
	}
	if !inFleet {
		fail(w, http.StatusBadRequest, "bad_request", "this node is in no fleet: a group is added through a member of the fleet")
		return
	}
	founder := fleet.Member{ID: dial.IDFromName(req.Name), Name: req.Name, Peer: req.Peer, HTTP: req.HTTP}
	_, err := realnet.Await(ctx, a.nd, func(c *node.Node, done func(struct{}, error)) {
		c.AddGroup(req.Group, fleet.Group{MIdx: req.MIdx, Voters: []fleet.Member{founder}}, req.Attestation, func(err error) { done(struct{}{}, err) })
	})
	switch {
	case a.adminRefused(w, transport.ActAddGroup, req.Name, err):
		return
	case errors.Is(err, node.ErrGroupNumber):
		fail(w, http.StatusConflict, "out_of_turn", "%v", err)
		return
	case errors.Is(err, fleet.ErrInvalid):
		fail(w, http.StatusBadRequest, "bad_request", "%v", err)
		return
	case errors.Is(err, node.ErrResizeRaced):
		fail(w, http.StatusServiceUnavailable, "raced", "%v", err)
		return
	case errors.Is(err, node.ErrNoDirectory):
		fail(w, http.StatusServiceUnavailable, "no_directory", "%v", err)
		return
	case err != nil:
		failErr(w, err)
		return
	}
	a.log.Info("added a group to the fleet", "group", req.Group, "founder", req.Name)
	var ans joinAnswer
	_ = a.nd.Do(ctx, func(c *node.Node) {
		ms := c.Control.Membership()
		ans.Members = membersJSON(append(append([]consensus.Member(nil), ms.Voters...), ms.Learners...))
	})
	writeJSON(w, http.StatusOK, ans)
}
