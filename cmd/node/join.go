package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/fenceline/fenceline/core/consensus"
	"github.com/fenceline/fenceline/core/node"
	"github.com/fenceline/fenceline/core/transport"
	"github.com/fenceline/fenceline/dial"
	"github.com/fenceline/fenceline/realnet"
)

// joinTimeout bounds how long a new node keeps asking to be added.
const joinTimeout = 30 * time.Second

// joinCluster asks the member at via to add this node as a learner, with
// the control key's attestation, and introduces the node to the members
// the answer names (it must reach the leader before it has applied the
// membership that adds it). A node that is already a member — a restart —
// asks nothing. A refusal of the attestation ends it at once; anything
// else is retried with backoff until joinTimeout.
func joinCluster(ctx context.Context, nd *realnet.Node, keys transport.Keys, name, peer, httpAddr, via string, log *slog.Logger) error {
	var member bool
	if err := nd.Do(ctx, func(c *node.Node) { member = c.Consensus.Membership().Index > 0 }); err != nil {
		return err
	}
	if member {
		log.Info("already a member; not joining again", "via", via)
		return nil
	}
	att, err := keys.Attest(name, peer, httpAddr)
	if err != nil {
		return err
	}
	body, _ := json.Marshal(joinRequest{Name: name, Peer: peer, HTTP: httpAddr, Attestation: hex.EncodeToString(att)})
	url := via
	if !strings.Contains(url, "://") {
		url = "http://" + url
	}
	url = strings.TrimSuffix(url, "/") + "/_cluster/members"
	client := &http.Client{Timeout: 15 * time.Second}
	deadline := time.Now().Add(joinTimeout)
	backoff := 100 * time.Millisecond
	for {
		ans, retry, err := askToJoin(ctx, client, url, body)
		if err == nil {
			peers := map[dial.NodeID]string{}
			for _, m := range ans.Members {
				peers[dial.IDFromName(m.Name)] = m.Peer
			}
			log.Info("joined as a learner", "via", via, "members", len(ans.Members))
			return nd.Introduce(ctx, peers)
		}
		if !retry || time.Now().After(deadline) {
			return err
		}
		log.Warn("join not answered yet; retrying", "via", via, "err", err, "in", backoff)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return ctx.Err()
		}
		backoff = min(2*backoff, 2*time.Second)
	}
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
	case resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusBadRequest:
		return ans, false, errors.New(strings.TrimSpace(string(b)))
	default:
		return ans, true, fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
}

// --- the cluster API's membership calls

// joinRequest is a node asking to join: who it is, where it listens, and
// the control key's attestation of exactly that.
type joinRequest struct {
	Name        string `json:"name"`
	Peer        string `json:"peer"`
	HTTP        string `json:"http"`
	Attestation string `json:"attestation"` // hex
}

type joinAnswer struct {
	Members []memberJSON `json:"members"`
}

func (a *api) join(w http.ResponseWriter, r *http.Request) {
	var req joinRequest
	if !decode(w, r, &req) {
		return
	}
	if req.Name == "" || req.Peer == "" {
		fail(w, http.StatusBadRequest, "bad_request", "a join names the node and its peer address")
		return
	}
	att, err := hex.DecodeString(req.Attestation)
	if err != nil || a.keys.CheckAttestation(req.Name, req.Peer, req.HTTP, att) != nil {
		// Who may join is the control key's word, never the node's own.
		fail(w, http.StatusForbidden, "forbidden", "the attestation for %q does not check against this cluster's control key", req.Name)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	id := dial.IDFromName(req.Name)
	var member bool
	if err := a.nd.Do(ctx, func(c *node.Node) {
		ms := c.Consensus.Membership()
		for _, m := range append(append([]consensus.Member(nil), ms.Voters...), ms.Learners...) {
			member = member || m.ID == id
		}
	}); err != nil {
		failErr(w, err)
		return
	}
	if !member {
		_, err := realnet.Await(ctx, a.nd, func(c *node.Node, done func(struct{}, error)) {
			m := consensus.NewMember(req.Name, req.Peer)
			m.HTTP = req.HTTP // attested with the rest
			c.Consensus.AddLearner(m, func(err error) { done(struct{}{}, err) })
		})
		if err != nil {
			failErr(w, err)
			return
		}
		a.log.Info("added a learner", "name", req.Name, "peer", req.Peer, "http", req.HTTP)
	}
	var ans joinAnswer
	_ = a.nd.Do(ctx, func(c *node.Node) {
		ms := c.Consensus.Membership()
		ans.Members = membersJSON(append(append([]consensus.Member(nil), ms.Voters...), ms.Learners...))
	})
	writeJSON(w, http.StatusOK, ans)
}

func (a *api) remove(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	_, err := realnet.Await(ctx, a.nd, func(c *node.Node, done func(struct{}, error)) {
		c.Consensus.RemoveMember(dial.IDFromName(name), func(err error) { done(struct{}{}, err) })
	})
	if err != nil {
		failErr(w, err)
		return
	}
	a.log.Info("removed a member", "name", name)
	writeJSON(w, http.StatusOK, map[string]string{"removed": name})
}
