package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/fenceline/fenceline/core/proxyonce"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/fenceline/fenceline/core/fleet"
	"github.com/fenceline/fenceline/core/kv"
	"github.com/fenceline/fenceline/core/node"
	"github.com/fenceline/fenceline/realnet"
)

// Leases and the watch stream: the replicated KV's lease API and its
// change feed, as seed 001 describes them. A refusal names the holder
// and when its lease lapses; Expired and Deleted are distinct events.

const (
	maxLeaseTTL  = 10 * time.Minute
	maxWatchers  = 64                    // concurrent watch streams; one more is 503 shed
	watchPoll    = 50 * time.Millisecond // how often a quiet stream looks for new events
	watchBatch   = 256                   // events read per look
	watchMaxIdle = 15 * time.Second      // a quiet stream writes a heartbeat line this often
)

type leaseJSON struct {
	Name       string `json:"name"`
	Holder     string `json:"holder"`
	Token      uint64 `json:"token"`
	Version    uint64 `json:"version"`
	DeadlineMs int64  `json:"deadline_ms"`
}

func leaseOf(l kv.Lease) leaseJSON {
	return leaseJSON{Name: l.Name, Holder: l.Holder, Token: l.Token, Version: l.Version, DeadlineMs: l.DeadlineMs}
}

// propose runs one KV op through raft and answers its result.
func (a *api) propose(r *http.Request, op kv.Op) (kv.Result, error) {
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	res, err := realnet.Await(ctx, a.nd, func(c *node.Node, done func(kv.Result, error)) { c.Admin.Propose(op, done) })
	if err == nil && res.Err != nil {
		err = res.Err
	}
	return res, err
}

// failProposal answers the error of a KV proposal: a lease refusal as 409
// naming the holder and its deadline, a lease nobody holds as 404, an
// invalid op as 400, and every other error as the API does.
func failProposal(w http.ResponseWriter, err error) {
	var ref *kv.Refusal
	switch {
	case errors.As(err, &ref):
		writeJSON(w, http.StatusConflict, map[string]any{"reason": "held", "error": err.Error(),
			"holder": ref.Holder, "until_ms": ref.UntilMs})
	case errors.Is(err, kv.ErrNotHeld):
		fail(w, http.StatusNotFound, "not_held", "%v", err)
	case errors.Is(err, kv.ErrInvalid):
		fail(w, http.StatusBadRequest, "bad_request", "%v", err)
	default:
		failErr(w, err)
	}
}

type leaseBody struct {
	Holder     string  `json:"holder"`
	TTLSeconds float64 `json:"ttlSeconds"`
}

// leasePut acquires the lease for the holder, or renews it if the holder
// already has it (the fencing token stays the same for one tenure).
func (a *api) leasePut(w http.ResponseWriter, r *http.Request) {
	var b leaseBody
	if !decode(w, r, &b) {
		return
	}
	ttl := time.Duration(b.TTLSeconds * float64(time.Second))
	if b.Holder == "" || ttl <= 0 || ttl > maxLeaseTTL {
		fail(w, http.StatusBadRequest, "bad_request", `a lease PUT is {"holder": <name>, "ttlSeconds": <0 < ttl <= %v>}`, maxLeaseTTL.Seconds())
		return
	}
	res, err := a.propose(r, kv.LeaseAcquire(r.PathValue("name"), b.Holder, ttl.Milliseconds()))
	if err != nil {
		failProposal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, leaseOf(res.Lease))
}

// leaseGet is a linearizable read of the lease.
func (a *api) leaseGet(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	name := r.PathValue("name")
	type answer struct {
		l  kv.Lease
		ok bool
	}
	ans, err := realnet.Await(ctx, a.nd, func(c *node.Node, done func(answer, error)) {
		c.Admin.Barrier(func(err error) {
			l, ok := c.Admin.LocalLease(name)
			done(answer{l, ok}, err)
		})
	})
	if err != nil {
		failErr(w, err)
		return
	}
	if !ans.ok {
		fail(w, http.StatusNotFound, "not_held", "lease %q is not held", name)
		return
	}
	writeJSON(w, http.StatusOK, leaseOf(ans.l))
}

// leaseDelete releases the lease; only its holder may (?holder=).
func (a *api) leaseDelete(w http.ResponseWriter, r *http.Request) {
	holder := r.URL.Query().Get("holder")
	if holder == "" {
		fail(w, http.StatusBadRequest, "bad_request", "a release names its holder: ?holder=<name>")
		return
	}
	if _, err := a.propose(r, kv.LeaseRelease(r.PathValue("name"), holder)); err != nil {
		failProposal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"released": true})
}

type eventJSON struct {
	Type       string `json:"type"` // put, deleted, expired; resync when events were lost
	Space      string `json:"space,omitempty"`
	Key        string `json:"key,omitempty"`
	Version    uint64 `json:"version"`
	Value      string `json:"value,omitempty"`
	Holder     string `json:"holder,omitempty"`
	Token      uint64 `json:"token,omitempty"`
	DeadlineMs int64  `json:"deadline_ms,omitempty"`
}

// watch streams the KV's change events under a key prefix as
// newline-delimited JSON (or server-sent events with
// Accept: text/event-stream), from ?from=<revision> or from now. If the
// node's event log no longer reaches back to the stream's position, it
// writes a "resync" line with the revision it resumes from: the events
// between were lost to this watcher, and it should read afresh.
func (a *api) watch(w http.ResponseWriter, r *http.Request) {
	if n := a.watchers.Add(1); n > maxWatchers {
		a.watchers.Add(-1)
		fail(w, http.StatusServiceUnavailable, "shed", "over %d watch streams", maxWatchers)
		return
	}
	defer a.watchers.Add(-1)
	prefix := r.URL.Query().Get("prefix")
	sse := strings.Contains(r.Header.Get("Accept"), "text/event-stream")
	var cursor uint64
	if from := r.URL.Query().Get("from"); from != "" {
		v, err := strconv.ParseUint(from, 10, 64)
		if err != nil {
			fail(w, http.StatusBadRequest, "bad_request", "from must be a revision")
			return
		}
		cursor = v
	} else if err := a.nd.Do(r.Context(), func(c *node.Node) { cursor = c.Admin.Revision() }); err != nil {
		failErr(w, err)
		return
	}
	flusher, _ := w.(http.Flusher)
	if sse {
		w.Header().Set("Content-Type", "text/event-stream")
	} else {
		w.Header().Set("Content-Type", "application/x-ndjson")
	}
	w.WriteHeader(http.StatusOK)
	// The server's write timeout bounds one answer; a stream is many:
	// each write gets its own, so a reader that stops reading is let go
	// after adminWriteTimeout, and one that reads is kept.
	rc := http.NewResponseController(w)
	write := func(e eventJSON) error {
		_ = rc.SetWriteDeadline(time.Now().Add(adminWriteTimeout))
		b, _ := jsonLine(e)
		if sse {
			b = append(append([]byte("data: "), b[:len(b)-1]...), '\n', '\n')
		}
		_, err := w.Write(b)
		return err
	}
	if flusher != nil {
		flusher.Flush()
	}
	lastWrite := time.Now()
	for {
		var evs []kv.Event
		var err error
		var rev uint64
		if derr := a.nd.Do(r.Context(), func(c *node.Node) {
			evs, err = c.Admin.Events(cursor, watchBatch)
			rev = c.Admin.Revision()
		}); derr != nil {
			return // the client went away, or the node is stopping
		}
		if errors.Is(err, kv.ErrCompacted) {
			if write(eventJSON{Type: "resync", Version: rev}) != nil {
				return
			}
			cursor = rev
		}
		for _, e := range evs {
			cursor = e.Version
			if !strings.HasPrefix(e.Key, prefix) {
				continue
			}
			ej := eventJSON{Type: e.Kind.String(), Space: e.Space.String(), Key: e.Key, Version: e.Version,
				Holder: e.Holder, Token: e.Token, DeadlineMs: e.DeadlineMs}
			if e.Space == kv.SpaceData {
				ej.Value = string(e.Value)
			}
			if write(ej) != nil {
				return
			}
			lastWrite = time.Now()
		}
		if len(evs) > 0 || err != nil {
			if flusher != nil {
				flusher.Flush()
			}
		}
		if len(evs) == watchBatch {
			continue
		}
		if time.Since(lastWrite) > watchMaxIdle {
			// A heartbeat, so that a proxy does not close a quiet stream
			// and a dead client is noticed.
			_ = rc.SetWriteDeadline(time.Now().Add(adminWriteTimeout))
			if _, err := fmt.Fprint(w, "\n"); err != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
			lastWrite = time.Now()
		}
		select {
		case <-r.Context().Done():
			return
		case <-time.After(watchPoll):
		}
	}
}

// kvPut writes a key of the replicated KV: one raft proposal, applied on
// every node. It is the raft path the flow store's owner path is measured
// against.
func (a *api) kvPut(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Value json.RawMessage `json:"value"`
	}
	if !decode(w, r, &b) {
		return
	}
	if len(b.Value) == 0 {
		fail(w, http.StatusBadRequest, "bad_request", `a PUT body is {"value": <json>}`)
		return
	}
	key := r.PathValue("key")
	if p, owned := serverOwned(key); owned {
		// The server's own keys are written only by the code that
		// checks what goes in them: an imposter definition written
		// here would skip every check the admin API makes.
		fail(w, http.StatusForbidden, "forbidden", "keys under %q are the server's own: change them through mountebank's API", p)
		return
	}
	if !a.kvRoom(r.Context(), key) {
		fail(w, http.StatusInsufficientStorage, "full", "the replicated KV holds %d keys or more: delete some before adding more", maxKVKeys)
		return
	}
	res, err := a.propose(r, kv.Put(key, b.Value))
	if err != nil {
		failProposal(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]uint64{"version": res.Version})
}

// kvGet is a linearizable read of a key of the replicated KV.
func (a *api) kvGet(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	type answer struct {
		e  kv.Entry
		ok bool
	}
	key := r.PathValue("key")
	ans, err := realnet.Await(ctx, a.nd, func(c *node.Node, done func(answer, error)) {
		c.Admin.Read(key, func(e kv.Entry, ok bool, err error) { done(answer{e, ok}, err) })
	})
	if err != nil {
		failErr(w, err)
		return
	}
	if !ans.ok {
		fail(w, http.StatusNotFound, "not_found", "no key %q", key)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"value": json.RawMessage(ans.e.Value), "version": ans.e.Version})
}

// serverOwned reports whether a KV key lies under a prefix the server
// writes itself, and which.
func serverOwned(key string) (string, bool) {
	for _, p := range []string{imposterPrefix, proxyonce.KVKey(""), fleet.KeyPrefix} {
		if strings.HasPrefix(key, p) {
			return p, true
		}
	}
	return "", false
}

// maxKVKeys bounds the keys the raw KV API may add to: each is in every
// member's memory and in every snapshot. The server's own keys count
// too (at most 1,000 imposters and their recordings, bounded by
// imposterhttp), so that a full KV refuses the raw API first.
const maxKVKeys = 100000

// kvRoom reports whether key may be written: it exists already, or the
// KV holds fewer than maxKVKeys keys. Counted on this member's applied
// state, in constant time: calls in flight elsewhere may overshoot the
// bound by as many as there are callers.
func (a *api) kvRoom(ctx context.Context, key string) bool {
	room := true
	_ = a.nd.Do(ctx, func(c *node.Node) {
		if _, ok := c.Admin.LocalGet(key); ok {
			return
		}
		room = c.Admin.LocalLen() < maxKVKeys
	})
	return room
}
