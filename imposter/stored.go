package imposter

import (
	"fmt"
	"strconv"
)

// Stored is an imposter as the cluster's configuration keeps it: what
// every member builds the imposter it serves from, so that all of them
// build the same one.
type Stored struct {
	// Incarnation names one creation: a change of stubs keeps it, a new
	// creation on the same port gets a new one, so a member tells
	// "changed" (keep the recorded requests and the listener) from
	// "deleted and created again" (start afresh).
	Incarnation string
	// Creation is the creation request as given, its port filled in.
	Creation *Object
	// StubIDs name the creation's stubs, in order. A stub keeps its id
	// while it is not replaced, and with it its place in its response
	// cycle (which the cluster keeps under the id): mountebank restarts a
	// stub's cycle when PUT /stubs, PUT /stubs/{i} or DELETE
	// /savedProxyResponses replace it, and keeps the others'.
	StubIDs []string
	// Resets counts DELETE /savedRequests since the creation: a member
	// that sees it move forgets the requests it recorded.
	Resets int
	// Recordings counts DELETE /savedProxyResponses since the creation: a
	// proxy recording is placed only by the creation, and in the
	// generation, it was made for, so one the deletion left behind (its
	// cleanup is best effort) is never placed or replayed again.
	Recordings int
}

// Scope names the creation and recording generation: what a proxy
// recording, a proxyOnce claim's signature and a recorded stub's cycle
// belong to.
func (d Stored) Scope() string {
	if d.Recordings == 0 {
		return d.Incarnation
	}
	return d.Incarnation + "/" + strconv.Itoa(d.Recordings)
}

// Encode is the stored bytes.
func (d Stored) Encode() []byte {
	ids := make([]any, len(d.StubIDs))
	for i, id := range d.StubIDs {
		ids[i] = id
	}
	o := NewObject().Set("incarnation", d.Incarnation).Set("imposter", d.Creation).Set("stubIds", ids)
	if d.Resets > 0 {
		o.Set("resets", float64(d.Resets))
	}
	if d.Recordings > 0 {
		o.Set("recordings", float64(d.Recordings))
	}
	return Marshal(o, 0)
}

// DecodeStored reads what Encode wrote. A definition stored before stubs
// had ids gets ids made of its incarnation and each stub's place.
func DecodeStored(b []byte) (Stored, error) {
	v, err := Parse(string(b))
	if err != nil {
		return Stored{}, err
	}
	o, _ := v.(*Object)
	if o == nil {
		return Stored{}, fmt.Errorf("not an imposter definition")
	}
	var d Stored
	inc, _ := o.Get("incarnation")
	imp, _ := o.Get("imposter")
	d.Incarnation, _ = inc.(string)
	d.Creation, _ = imp.(*Object)
	if d.Incarnation == "" || d.Creation == nil {
		return Stored{}, fmt.Errorf("not an imposter definition")
	}
	if r, ok := o.Get("resets"); ok {
		f, _ := r.(float64)
		d.Resets = int(f)
	}
	if r, ok := o.Get("recordings"); ok {
		f, _ := r.(float64)
		d.Recordings = int(f)
	}
	n := len(StubConfigs(d.Creation))
	if raw, ok := o.Get("stubIds"); ok {
		list, _ := raw.([]any)
		for _, x := range list {
			s, _ := x.(string)
			d.StubIDs = append(d.StubIDs, s)
		}
	} else {
		for i := range n {
			d.StubIDs = append(d.StubIDs, d.Incarnation+"."+strconv.Itoa(i))
		}
	}
	if len(d.StubIDs) != n {
		return Stored{}, fmt.Errorf("imposter definition names %d stub ids for %d stubs", len(d.StubIDs), n)
	}
	return d, nil
}

// StubConfigs is a creation request's stubs, as given.
func StubConfigs(creation *Object) []any {
	v, _ := creation.Get("stubs")
	list, _ := v.([]any)
	return list
}

// Build compiles the stored imposter for port, its stubs named, as one
// of a cluster's (Clustered, in the stored scope).
func (d Stored) Build(port int, localCycle bool) (*Imposter, error) {
	imp, err := New(d.Creation, port)
	if err != nil {
		return nil, err
	}
	if err := imp.AssignStubIDs(d.StubIDs); err != nil {
		return nil, err
	}
	imp.Clustered(d.Scope(), localCycle)
	imp.incarnation = d.Incarnation
	return imp, nil
}

// WithoutSavedProxyResponses is stubs with every response a proxy
// recorded taken out, and every stub left with none dropped: what DELETE
// /savedProxyResponses leaves of a definition (a replayable export's
// recordings included, as mountebank finds them by _proxyResponseTime).
func WithoutSavedProxyResponses(stubs []any) []any {
	out := []any{}
	for _, s := range stubs {
		o, ok := s.(*Object)
		if !ok {
			out = append(out, s)
			continue
		}
		rs, _ := o.Get("responses")
		list, _ := rs.([]any)
		var left []any
		for _, r := range list {
			if !isRecorded(r) {
				left = append(left, r)
			}
		}
		switch {
		case len(left) == 0 && len(list) > 0:
			continue
		case len(left) < len(list):
			o = Clone(o).(*Object)
			o.Set("responses", left)
		}
		out = append(out, o)
	}
	return out
}
