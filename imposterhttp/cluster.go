package imposterhttp

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fenceline/fenceline/core/bugs"
	"github.com/fenceline/fenceline/imposter"
)

// This file: one server, many members. An admin answer speaks for the
// whole cluster: a change is answered once every member serves it (or
// the answer names those that did not confirm), and a read of recorded
// requests gathers every member's (or names those that could not be
// asked). Nothing is left out in silence.

// Headers that say an answer is partial.
const (
	// UnconfirmedHeader, on an admin change's answer, names the members
	// that did not confirm, within the rollout's bound, that they serve
	// the change: they may still serve what was there before.
	UnconfirmedHeader = "X-Fenceline-Unconfirmed"
	// MissingHeader, on an answer that shows recorded requests (or their
	// count), names the members that could not be asked for theirs: the
	// list and the count leave their requests out.
	MissingHeader = "X-Fenceline-Missing"
)

// Member is one member of the cluster, as its committed membership names
// it.
type Member struct {
	ID   uint64
	Name string
	HTTP string // its admin API's address
}

// Cluster is what the server needs of the cluster beyond the
// configuration store.
type Cluster interface {
	// Self is this node's member id.
	Self() uint64
	// Members are the committed membership's members, this node among
	// them, sorted by id.
	Members(ctx context.Context) ([]Member, error)
	// Served reports that this node serves the configuration at rev:
	// every imposter of that revision bound, changed or stopped.
	Served(rev uint64)
	// AwaitRollout waits until every member serves rev, or until the
	// rollout's bound, and returns the names of those that did not
	// confirm.
	AwaitRollout(ctx context.Context, rev uint64) ([]string, error)
	// Nudges receives whenever a change waits for this node to serve a
	// revision it has applied: reconcile now.
	Nudges() <-chan struct{}
}

// alone is the cluster of a server by itself.
type alone struct{}

func (alone) Self() uint64 { return 1 }
func (alone) Members(context.Context) ([]Member, error) {
	return []Member{{ID: 1, Name: "local"}}, nil
}
func (alone) Served(uint64)                                          {}
func (alone) AwaitRollout(context.Context, uint64) ([]string, error) { return nil, nil }
func (alone) Nudges() <-chan struct{}                                { return nil }

// UseCluster makes the server answer for the cluster c.
func (s *Server) UseCluster(c Cluster) { s.cluster = c }

// recordsPath is the members' internal route for their recorded requests.
const recordsPath = "/_cluster/records"

// recordsTimeout bounds a read of the members' records.
const recordsTimeout = 2 * time.Second

// maxRecordsBody bounds a member's answer: every port's records, at most
// MaxRecordedRequests each of at most a request's size, would be far
// more; a member's answer past this is taken as no answer.
const maxRecordsBody = 256 << 20

// recordsQuery asks a member for its part of an imposter's requests: the
// creation and reset it must match (a member behind or ahead on either
// holds none of this imposter's), and whether the list is wanted or only
// the count.
type recordsQuery struct {
	Port        int    `json:"port"`
	Incarnation string `json:"incarnation"`
	Resets      int    `json:"resets"`
	List        bool   `json:"list"`
}

type recordedJSON struct {
	AtNs    int64           `json:"at"`
	Seq     uint64          `json:"seq"`
	Request json.RawMessage `json:"request"`
}

type recordsPart struct {
	Port  int            `json:"port"`
	Node  uint64         `json:"node"`
	Count int            `json:"count"`
	List  []recordedJSON `json:"records,omitempty"`
	// Partial: the member restarted since the imposter was created, and
	// lost what it recorded before.
	Partial bool `json:"partial,omitempty"`
}

// maxGathers bounds the reads of the members' records in flight from one
// node: past it a read waits (at most recordsTimeout) for one to end, then
// names every other member missing.
const maxGathers = 4

// records answers a member's gather with this node's part of each
// imposter asked for: 503 until this node serves the configuration (it
// has caught up and passed once), so that the asker names it rather than
// take its empty part for a complete one.
func (s *Server) records(w http.ResponseWriter, r *http.Request) {
	if !s.ready.Load() {
		writeUnavailable(w, errors.New("this member has not caught up with the configuration yet"))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		writeErrors(w, http.StatusBadRequest, &imposter.Error{Code: imposter.CodeBadData, Message: "the body could not be read"})
		return
	}
	nonce, signer, err := checkCall(s.memberKeys(), r.Header.Get(MemberHeader), r.Method, recordsPath, body, time.Now())
	if err != nil {
		denyMember(w, err)
		return
	}
	var qs []recordsQuery
	err = json.Unmarshal(body, &qs)
	if err != nil || len(qs) > 1<<16 {
		writeErrors(w, http.StatusBadRequest, &imposter.Error{Code: imposter.CodeBadData, Message: "want a JSON array of {port, incarnation, resets, list}"})
		return
	}
	out := []recordsPart{}
	for _, q := range qs {
		p, ok, partial := s.localPart(q)
		if !ok {
			continue
		}
		jp := recordsPart{Port: q.Port, Node: p.Node, Count: p.Count, Partial: partial}
		for _, rec := range p.List {
			jp.List = append(jp.List, recordedJSON{AtNs: rec.AtNs, Seq: rec.Seq, Request: imposter.Marshal(rec.Value, 0)})
		}
		out = append(out, jp)
	}
	b, _ := json.Marshal(out)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set(MemberHeader, signAnswer(signer, nonce, b)) // under the key the caller used
	_, _ = w.Write(b)
}

// localPart is this node's part of q's imposter, if it runs the same
// creation at the same reset; partial if it restarted since, and lost
// what it recorded before.
func (s *Server) localPart(q recordsQuery) (imposter.Records, bool, bool) {
	s.mu.Lock()
	sv := s.imposters[q.Port]
	s.mu.Unlock()
	if sv == nil {
		return imposter.Records{}, false, false
	}
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if sv.incarnation != q.Incarnation || sv.resets != q.Resets {
		return imposter.Records{}, false, false
	}
	if !q.List {
		return imposter.Records{Node: s.cluster.Self(), Count: sv.imp.NumberOfRequests}, true, sv.partial
	}
	return sv.imp.LocalRecords(s.cluster.Self()), true, sv.partial
}

// gather reads every member's records of the imposters in qs, this
// node's own included, and merges each imposter's. missing names the
// members that could not be asked.
func (s *Server) gather(ctx context.Context, qs []recordsQuery) (map[int]*imposter.Gathered, []string) {
	parts := map[int][]imposter.Records{}
	var missing []string
	members, err := s.cluster.Members(ctx)
	restarted := func(id uint64) {
		name := strconv.FormatUint(id, 16)
		for _, m := range members {
			if m.ID == id {
				name = m.Name
			}
		}
		if r := name + " (restarted)"; !slices.Contains(missing, r) {
			missing = append(missing, r)
		}
	}
	for _, q := range qs {
		if p, ok, partial := s.localPart(q); ok {
			parts[q.Port] = append(parts[q.Port], p)
			if partial {
				restarted(s.cluster.Self())
			}
		}
	}
	if err != nil {
		missing = append(missing, "members unknown: "+err.Error())
	} else {
		ids := make([]uint64, len(members))
		for i, m := range members {
			ids[i] = m.ID
		}
		ask := imposter.GatherFrom(s.cluster.Self(), ids, bugs.Set{})
		var mu sync.Mutex
		var wg sync.WaitGroup
		ctx, cancel := context.WithTimeout(ctx, recordsTimeout)
		defer cancel()
		busy := false
		select {
		case s.gathers <- struct{}{}:
			defer func() { <-s.gathers }()
		case <-ctx.Done():
			busy = true
		}
		for _, m := range members {
			if !slices.Contains(ask, m.ID) {
				continue
			}
			if busy {
				missing = append(missing, m.Name+" (busy)")
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				got, err := fetchRecords(ctx, s.memberKeys(), m, qs)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					missing = append(missing, m.Name)
					return
				}
				for _, p := range got {
					parts[p.Port] = append(parts[p.Port], p.Records)
					if p.partial {
						restarted(m.ID)
					}
				}
			}()
		}
		wg.Wait()
	}
	slices.Sort(missing)
	out := map[int]*imposter.Gathered{}
	for _, q := range qs {
		g := imposter.MergeRecords(parts[q.Port], imposter.MaxRecordedRequests)
		out[q.Port] = &g
	}
	return out, missing
}

type portRecords struct {
	Port int
	imposter.Records
	partial bool
}

// recordsClient asks members for their records.
// A member whose admin API serves TLS may use a self-signed certificate:
// it is not checked, because the call and the answer carry the member
// key's MAC, which is what makes a member's answer believed.
var recordsClient = &http.Client{Timeout: recordsTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: 8, IdleConnTimeout: 30 * time.Second,
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // authenticated by the member MAC

// fetchRecords asks member m for its part of each imposter of qs.
func fetchRecords(ctx context.Context, keys [][]byte, m Member, qs []recordsQuery) ([]portRecords, error) {
	if m.HTTP == "" {
		return nil, errors.New("no HTTP address")
	}
	body, _ := json.Marshal(qs)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, memberURL(m.HTTP)+recordsPath, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	var key []byte
	if len(keys) > 0 {
		key = keys[0]
	}
	sig, nonce := signCall(key, http.MethodPost, recordsPath, body, time.Now())
	req.Header.Set(MemberHeader, sig)
	resp, err := recordsClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %d", m.Name, resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxRecordsBody+1))
	if err != nil || len(b) > maxRecordsBody {
		return nil, fmt.Errorf("%s: records unreadable or over %d bytes", m.Name, maxRecordsBody)
	}
	if !answeredBy(keys, resp.Header.Get(MemberHeader), nonce, b) {
		return nil, fmt.Errorf("%s: the answer does not carry the member key's MAC", m.Name)
	}
	var parts []recordsPart
	if err := json.Unmarshal(b, &parts); err != nil {
		return nil, err
	}
	out := make([]portRecords, 0, len(parts))
	for _, p := range parts {
		pr := portRecords{Port: p.Port, Records: imposter.Records{Node: p.Node, Count: p.Count}, partial: p.Partial}
		for _, rj := range p.List {
			v, err := imposter.Parse(string(rj.Request))
			o, ok := v.(*imposter.Object)
			if err != nil || !ok {
				return nil, fmt.Errorf("%s: a recorded request does not parse", m.Name)
			}
			pr.List = append(pr.List, imposter.Recorded{AtNs: rj.AtNs, Seq: rj.Seq, Value: o})
		}
		out = append(out, pr)
	}
	return out, nil
}

// partial names, in a header, the members an answer leaves out.
func partial(w http.ResponseWriter, header string, names []string) {
	if len(names) > 0 {
		w.Header().Set(header, strings.Join(names, ", "))
	}
}

// queryOf asks for sv's records as this node runs it.
func queryOf(sv *served, list bool) recordsQuery {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	return recordsQuery{Port: sv.port, Incarnation: sv.incarnation, Resets: sv.resets, List: list}
}

// gathered is every member's records of the imposters all, by port, and
// the header naming the members left out, set on w.
func (s *Server) gathered(ctx context.Context, w http.ResponseWriter, all []*served, list bool) map[int]*imposter.Gathered {
	qs := make([]recordsQuery, 0, len(all))
	for _, sv := range all {
		qs = append(qs, queryOf(sv, list))
	}
	if len(qs) == 0 {
		return nil
	}
	g, missing := s.gather(ctx, qs)
	partial(w, MissingHeader, missing)
	return g
}
