package flow

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/clock"
	"github.com/fenceline/fenceline/core/bugs"
	"github.com/fenceline/fenceline/core/ring"
	"github.com/fenceline/fenceline/core/shard"
	"github.com/fenceline/fenceline/dial"
)

// sent records frames instead of sending them.
type sent struct {
	frames []struct {
		to dial.NodeID
		m  msg
	}
	fail error
}

func (s *sent) Send(to dial.NodeID, frame []byte) error {
	if s.fail != nil {
		return s.fail
	}
	m, err := decodeFrame(frame)
	if err != nil {
		panic(err)
	}
	s.frames = append(s.frames, struct {
		to dial.NodeID
		m  msg
	}{to, m})
	return nil
}

type ctl struct {
	m        uint64
	voters   []dial.NodeID
	isolated bool
	// since is ContactSince's answer; a Confirm is answered at once with
	// nil unless hold is set, when it waits in confirms.
	since    time.Duration
	hold     bool
	confirms []func(error)
	asked    int
}

func (c *ctl) Membership() Membership      { return Membership{Index: c.m, Voters: c.voters} }
func (c *ctl) IsIsolated() bool            { return c.isolated }
func (c *ctl) ContactSince() time.Duration { return c.since }
func (c *ctl) Confirm(done func(error)) {
	c.asked++
	if c.hold {
		c.confirms = append(c.confirms, done)
		return
	}
	done(nil)
}

var (
	idA, idB, idC = dial.IDFromName("a"), dial.IDFromName("b"), dial.IDFromName("c")
)

func newTestStore(t *testing.T, id dial.NodeID, cfg Config) (*Store, *clock.Manual, *sent, *ctl) {
	t.Helper()
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	net := &sent{}
	c := &ctl{m: 1, voters: []dial.NodeID{idA, idB, idC}}
	s, err := New(cfg, Env{ID: id, Epoch: 1, Clock: clk, Net: net, Ctl: c, Rand: rand.New(rand.NewPCG(1, 2))})
	require.NoError(t, err)
	return s, clk, net, c
}

// ownedBy finds a flow id that the given node owns among a, b, c.
func ownedBy(t *testing.T, id dial.NodeID) string {
	r := ring.New([]dial.NodeID{idA, idB, idC})
	for i := 0; i < 1000; i++ {
		f := ring.ImposterKey(8080, string(rune('a'+i%26))+string(rune('a'+i/26)))
		if o, _ := r.Owner(ring.ClassFlow, f); o == id {
			return f
		}
	}
	t.Fatal("no flow found")
	return ""
}

func do(s *Store, req Request) (Response, error, bool) {
	var resp Response
	var err error
	done := false
	s.Do(req, func(r Response, e error) { resp, err, done = r, e, true })
	return resp, err, done
}

func TestOwnerServesAfterAdoptingAndStampsTuples(t *testing.T) {
	s, clk, net, _ := newTestStore(t, idA, Config{})
	f := ownedBy(t, idA)
	_, err, done := do(s, Request{Flow: f, Op: OpSet, Key: "k", Value: []byte("1")})
	require.True(t, done)
	require.ErrorIs(t, err, ErrNotAdopted, "the first call on a flow starts its adoption")
	require.True(t, Known(err))
	// Answer the adoption from both other nodes: nothing to adopt.
	for _, fr := range net.frames {
		if fr.m.Kind == FrameAdopt {
			s.HandleFrame(fr.to, frame(msg{Kind: FrameAdoptResp, ID: fr.m.ID, M: fr.m.M, Flow: f}))
		}
	}
	// No previous owner that served the flow answered (a fresh store
	// knows none): adoption waits out AdoptWait even with every copy in,
	// since the last server may be one nobody asked.
	require.False(t, s.Adopted(f))
	clk.Advance(time.Second)
	require.True(t, s.Adopted(f))
	net.frames = nil
	_, err, _ = do(s, Request{Flow: f, Op: OpSet, Key: "k", Value: []byte("1")})
	require.NoError(t, err)
	v := s.Copy(f)["k"]
	require.Equal(t, Tuple{MIdx: 1, V: 1<<32 + 1, Origin: idA}, v.Tuple, "writes count above the boot epoch")
	pushes := 0
	for _, fr := range net.frames {
		if fr.m.Kind == FramePush {
			pushes++
		}
	}
	require.Equal(t, 2, pushes, "the write goes to both successors")
	resp, err, _ := do(s, Request{Flow: f, Op: OpIncr, Key: "k", Delta: 41})
	require.NoError(t, err)
	require.Equal(t, int64(42), resp.Int)
	_, err, _ = do(s, Request{Flow: f, Op: OpSet, Key: "w", Value: []byte("word")})
	require.NoError(t, err)
	_, err, _ = do(s, Request{Flow: f, Op: OpIncr, Key: "w", Delta: 1})
	require.ErrorIs(t, err, ErrNotInteger)
	require.False(t, errors.Is(err, ErrUnavailable), "a bad incr is the caller's error, not a 503")
	// A key whose flow left the shard (evicted, or purged after its
	// grace) is written anew under a tuple no earlier write had: a
	// replica still holding the old write must not take the new one for
	// it (tuple-unique).
	latest := s.Copy(f)["w"].Tuple
	s.sh.Drop(f)
	require.Empty(t, s.Copy(f))
	_, err, _ = do(s, Request{Flow: f, Op: OpSet, Key: "k", Value: []byte("2")})
	require.NoError(t, err)
	again := s.Copy(f)["k"].Tuple
	require.True(t, latest.Less(again), "%v after %v", again, latest)
}

// A flow first asked for once the membership has been in force for
// AdoptWait (every new flow of a stateful imposter, in a cluster that
// has not changed lately) is adopted as soon as every copy it asks for
// has answered: the isolation window it waits out is spent. One copy is
// not enough: the other may hold a newer write; without every answer,
// it waits out AdoptWait as before.
func TestAdoptionAfterTheWaitIsSpentNeedsEveryCopy(t *testing.T) {
	s, clk, net, _ := newTestStore(t, idA, Config{})
	f := ownedBy(t, idA)
	_, _, _ = do(s, Request{Flow: f, Op: OpGet, Key: "k"}) // the membership comes into force
	clk.Advance(time.Second)
	net.frames = nil
	var g string
	for i := 0; g == ""; i++ {
		if c := ring.ImposterKey(8080, fmt.Sprintf("later-%d", i)); c != f {
			if o, _ := ring.New([]dial.NodeID{idA, idB, idC}).Owner(ring.ClassFlow, c); o == idA {
				g = c
			}
		}
	}
	_, err, _ := do(s, Request{Flow: g, Op: OpGet, Key: "k"})
	require.ErrorIs(t, err, ErrNotAdopted, "the first call asks the copies")
	answered := 0
	for _, fr := range net.frames {
		if fr.m.Kind == FrameAdopt && fr.m.Flow == g {
			s.HandleFrame(fr.to, frame(msg{Kind: FrameAdoptResp, ID: fr.m.ID, M: fr.m.M, Flow: g}))
			if answered++; answered == 1 {
				require.False(t, s.Adopted(g), "one copy of two is not enough")
			}
		}
	}
	require.Equal(t, 2, answered)
	require.True(t, s.Adopted(g), "every copy answered and the window is spent: adopted without waiting")
	_, err, _ = do(s, Request{Flow: g, Op: OpGet, Key: "k"})
	require.NoError(t, err)

	// Right after a membership change, every copy answering is not
	// enough: a node the ring no longer names may still serve the flow.
	fresh, clk2, net2, _ := newTestStore(t, idA, Config{})
	_, err, _ = do(fresh, Request{Flow: g, Op: OpGet, Key: "k"})
	require.ErrorIs(t, err, ErrNotAdopted)
	for _, fr := range net2.frames {
		if fr.m.Kind == FrameAdopt && fr.m.Flow == g {
			fresh.HandleFrame(fr.to, frame(msg{Kind: FrameAdoptResp, ID: fr.m.ID, M: fr.m.M, Flow: g}))
		}
	}
	require.False(t, fresh.Adopted(g), "the membership is new: the window is not spent")
	clk2.Advance(time.Second)
	require.True(t, fresh.Adopted(g))
}

func frame(m msg) []byte { return encodeFrame(m) }

func TestOwnerChecksInOrder(t *testing.T) {
	s, _, _, c := newTestStore(t, idA, Config{})
	f := ownedBy(t, idA)
	var got error
	reply := func(_ Response, err error) { got = err }
	s.serve(7, Request{Flow: f, Op: OpGet, Key: "k"}, reply)
	require.ErrorIs(t, got, ErrFenced, "a caller at another m_idx is fenced first")
	s.serve(1, Request{Flow: ownedBy(t, idB), Op: OpGet, Key: "k"}, reply)
	require.ErrorIs(t, got, ErrNotOwner)
	c.isolated = true
	s.serve(1, Request{Flow: f, Op: OpGet, Key: "k"}, reply)
	require.ErrorIs(t, got, ErrIsolated)
	c.isolated = false
	s.serve(1, Request{Flow: f, Op: OpGet, Key: "k"}, reply)
	require.ErrorIs(t, got, ErrNotAdopted)
}

// An owner back in contact with its leader (ContactSince moved) serves
// again only once a barrier asked for after that instant has answered. It
// holds the requests that come meanwhile and serves them when it does;
// refuses them if it fails, or after a quarter of the call deadline; asks
// for one barrier at a time, and never counts one asked for before the
// contact now.
func TestAnOwnerBackInContactConfirmsBeforeServing(t *testing.T) {
	s, clk, net, c := newTestStore(t, idA, Config{})
	f := ownedBy(t, idA)
	get := func() *error {
		var got error = errors.New("not answered")
		s.serve(1, Request{Flow: f, Op: OpGet, Key: "k"}, func(_ Response, err error) { got = err })
		return &got
	}
	get() // confirmed at once, and starts the adoption
	require.Equal(t, 1, c.asked)
	for _, fr := range net.frames {
		if fr.m.Kind == FrameAdopt {
			s.HandleFrame(fr.to, frame(msg{Kind: FrameAdoptResp, ID: fr.m.ID, M: fr.m.M, Flow: f}))
		}
	}
	clk.Advance(time.Second) // AdoptWait
	require.NoError(t, *get())
	require.Equal(t, 1, c.asked, "a confirmation holds while contact lasts")

	c.hold, c.since = true, clk.Mono()+1 // contact broke and began again
	clk.Advance(time.Millisecond)
	held := []*error{get(), get(), get()}
	require.Equal(t, 2, c.asked, "one confirmation in flight at a time")
	for _, got := range held {
		require.EqualError(t, *got, "not answered", "held until the confirmation answers")
	}
	c.confirms[0](nil)
	for _, got := range held {
		require.NoError(t, *got, "served once it did")
	}
	require.NoError(t, *get())

	// A failed confirmation refuses what it held; the next request asks
	// again.
	c.since = clk.Mono() + 1
	clk.Advance(time.Millisecond)
	got := get()
	c.confirms[1](errors.New("no answer"))
	require.ErrorIs(t, *got, ErrIsolated)
	got = get()
	require.Equal(t, 4, c.asked)
	// Unanswered, it refuses what it holds after a quarter of the
	// deadline, so the caller hears within its own.
	clk.Advance(499 * time.Millisecond)
	require.EqualError(t, *got, "not answered")
	clk.Advance(time.Millisecond)
	require.ErrorIs(t, *got, ErrIsolated)

	// Contact breaks again while a confirmation is in flight: that one
	// cannot count, so a new one is asked for at once, not after it
	// times out; the old one's answer releases nothing.
	c.since = clk.Mono() + 1
	clk.Advance(time.Millisecond)
	got = get()
	require.Equal(t, 5, c.asked)
	c.confirms[2](nil) // asked before this contact began
	require.EqualError(t, *got, "not answered")
	c.confirms[3](nil)
	require.NoError(t, *got)

	// At its bound it holds no more: the next request is refused at once.
	c.since = clk.Mono() + 1
	clk.Advance(time.Millisecond)
	for i := 0; i < maxAwaiting; i++ {
		require.EqualError(t, *get(), "not answered")
	}
	require.ErrorIs(t, *get(), ErrIsolated, "past maxAwaiting")
	c.confirms[4](nil)
	require.NoError(t, *get())

	// A contact that has lasted AdoptWait counts, barrier or not (a node
	// too far for one to come back within the proposal timeout).
	c.since = clk.Mono() + 1
	clk.Advance(time.Millisecond)
	got = get()
	clk.Advance(time.Second)
	require.ErrorIs(t, *got, ErrIsolated, "held past a quarter of the deadline")
	require.NoError(t, *get(), "in contact for AdoptWait")
}

func TestBridgeShedsAtOnceAndBoundsEveryCall(t *testing.T) {
	s, clk, _, _ := newTestStore(t, idA, Config{Permits: 2})
	f := ownedBy(t, idB) // remote: calls wait on the owner
	var errs []error
	for i := 0; i < 3; i++ {
		s.Do(Request{Flow: f, Op: OpGet, Key: "k"}, func(_ Response, err error) { errs = append(errs, err) })
	}
	require.Len(t, errs, 1, "the third call finds no permit and is answered at once")
	require.ErrorIs(t, errs[0], ErrShed)
	require.True(t, Known(errs[0]))
	clk.Advance(2 * time.Second)
	require.Len(t, errs, 3, "no call outlives the deadline")
	require.ErrorIs(t, errs[1], ErrTimeout)
	require.False(t, Known(errs[1]), "a timeout is an unknown outcome")
	_, err, done := do(s, Request{Flow: f, Op: OpGet, Key: "k"})
	require.False(t, done, "permits came back")
	_ = err
}

func TestFailedSendIsNeverALocalWrite(t *testing.T) {
	s, _, net, _ := newTestStore(t, idA, Config{})
	f := ownedBy(t, idB)
	net.fail = dial.ErrUnreachable
	_, err, done := do(s, Request{Flow: f, Op: OpSet, Key: "k", Value: []byte("x")})
	require.True(t, done)
	require.ErrorIs(t, err, ErrSend)
	require.True(t, Known(err))
	require.Empty(t, s.Copy(f), "no local write on a node that does not own the flow")

	bug, _, bnet, _ := newTestStore(t, idA, Config{Bugs: bugs.Set{LocalFallback: true}})
	bnet.fail = dial.ErrUnreachable
	_, err, _ = do(bug, Request{Flow: f, Op: OpSet, Key: "k", Value: []byte("x")})
	require.NoError(t, err, "the planted bug serves it locally")
	require.Contains(t, bug.Copy(f), "k")
}

func TestMergeKeepsTheLargerTuple(t *testing.T) {
	s, _, _, _ := newTestStore(t, idA, Config{})
	hi := Value{Data: []byte("new"), Tuple: Tuple{MIdx: 2, V: 1, Origin: idB}}
	lo := Value{Data: []byte("old"), Tuple: Tuple{MIdx: 1, V: 99, Origin: idC}}
	s.merge("f", map[string]Value{"k": hi}, shard.Async)
	s.merge("f", map[string]Value{"k": lo}, shard.Async)
	require.Equal(t, "new", string(s.Copy("f")["k"].Data), "a deposed owner's write loses by arithmetic")
}

// An owner that adopted a flow at m_idx 2 takes no copy stamped below it:
// a deposed owner's push in flight, or its copy handed on later, would
// bring back what a lossy adoption dropped. Keys stamped at 2 or later
// are taken, whether they come alone or beside stale ones.
func TestMergeRefusesWhatPredatesTheAdoption(t *testing.T) {
	s, _, _, c := newTestStore(t, idA, Config{})
	f := ownedBy(t, idA)
	c.m = 2
	s.refresh()
	s.adopted[f] = 2
	stale := Value{Data: []byte("old"), Tuple: Tuple{MIdx: 1, V: 7, Origin: idB}}
	fresh := Value{Data: []byte("new"), Tuple: Tuple{MIdx: 2, V: 1<<32 + 1, Origin: idA}}
	s.merge(f, map[string]Value{"gone": stale}, shard.Async)
	require.NotContains(t, s.Copy(f), "gone", "a whole copy from before the adoption")
	s.merge(f, map[string]Value{"gone": stale, "kept": fresh}, shard.Async)
	require.NotContains(t, s.Copy(f), "gone", "a stale key beside a fresh one")
	require.Equal(t, "new", string(s.Copy(f)["kept"].Data))
	// What this owner stamped at this m_idx in an earlier incarnation
	// (a lower boot epoch) is from before the adoption too.
	earlier := Value{Data: []byte("before the restart"), Tuple: Tuple{MIdx: 2, V: 0<<32 + 9, Origin: idA}}
	s.merge(f, map[string]Value{"earlier": earlier}, shard.Async)
	require.NotContains(t, s.Copy(f), "earlier", "a copy this owner stamped before it restarted and adopted")
	// A replica, which adopted nothing, takes every newer copy.
	r, _, _, _ := newTestStore(t, idB, Config{})
	r.merge(f, map[string]Value{"gone": stale}, shard.Async)
	require.Equal(t, "old", string(r.Copy(f)["gone"].Data))
}

func TestAdoptionRequestFencesAStaleOwner(t *testing.T) {
	s, _, net, c := newTestStore(t, idA, Config{})
	f := ownedBy(t, idA)
	s.adopted[f] = 1
	s.HandleFrame(idB, frame(msg{Kind: FrameAdopt, ID: 9, M: 5, Flow: f}))
	require.Equal(t, FrameAdoptResp, net.frames[len(net.frames)-1].m.Kind)
	_, err, _ := do(s, Request{Flow: f, Op: OpSet, Key: "k", Value: []byte("x")})
	require.ErrorIs(t, err, ErrFenced, "an owner asked by a newer owner serves the flow no more")
	// A fence only rises: an ask from an owner between (m_idx 3, late or
	// from a deposed adopter) leaves it at 5, so the node, caught up to 3,
	// still does not serve the flow that a newer owner adopted at 5.
	s.HandleFrame(idC, frame(msg{Kind: FrameAdopt, ID: 4, M: 3, Flow: f}))
	c.m = 3
	s.refresh()
	s.adopted[f] = 3
	_, err, _ = do(s, Request{Flow: f, Op: OpSet, Key: "k", Value: []byte("x")})
	require.ErrorIs(t, err, ErrFenced, "fenced at 5, not 3")
}

func TestDuplicateRequestAppliesOnce(t *testing.T) {
	s, _, net, _ := newTestStore(t, idA, Config{})
	f := ownedBy(t, idA)
	s.adopted[f] = 1
	req := frame(msg{Kind: FrameOp, ID: 3, Session: 77, M: 1, Req: &Request{Flow: f, Op: OpIncr, Key: "n", Delta: 1}})
	s.HandleFrame(idB, req)
	s.HandleFrame(idB, req)
	require.Equal(t, "1", string(s.Copy(f)["n"].Data))
	var answers int
	for _, fr := range net.frames {
		if fr.m.Kind == FrameOpResp {
			answers++
			require.Equal(t, int64(1), fr.m.Resp.Int)
		}
	}
	require.Equal(t, 2, answers, "the duplicate gets the same answer")
}

func TestBadInput(t *testing.T) {
	s, _, _, _ := newTestStore(t, idA, Config{})
	s.HandleFrame(idB, []byte{FramePrefix, '{', 'x'})
	s.HandleFrame(idB, []byte{9})
	s.HandleFrame(idB, []byte{FramePrefix, frameVersion, 99})
	require.Equal(t, uint64(3), s.BadFrames)
	for _, req := range []Request{{Op: OpGet, Key: "k"}, {Flow: "f", Op: 99, Key: "k"}, {Flow: "f", Op: OpSet}} {
		_, err, done := do(s, req)
		require.True(t, done)
		require.ErrorIs(t, err, ErrBadRequest)
	}
	require.Error(t, Config{Permits: -1}.Validate())
}

// A replica prunes the keys the owner's anti-entropy copy does not hold:
// the owner's copy is the authority. Only from the owner, at the
// membership both work at; the planted bug no-prune keeps them.
func TestAntiEntropyPrunesWhatTheOwnerLacks(t *testing.T) {
	for _, bug := range []bool{false, true} {
		s, _, _, _ := newTestStore(t, idB, Config{Bugs: bugs.Set{NoPrune: bug}})
		f := ownedBy(t, idA)
		tup := Tuple{MIdx: 1, V: 5, Origin: idA}
		s.merge(f, map[string]Value{"keep": {Data: []byte("1"), Tuple: tup}, "stale": {Data: []byte("x"), Tuple: tup}}, shard.Async)

		// From a node that is not the owner: nothing pruned.
		s.HandleFrame(idC, frame(msg{Kind: FrameAEResp, M: 1, Flows: map[string]map[string]Value{f: {"keep": {Data: []byte("1"), Tuple: tup}}}}))
		require.Contains(t, s.Copy(f), "stale")

		s.HandleFrame(idA, frame(msg{Kind: FrameAEResp, M: 1, Flows: map[string]map[string]Value{f: {"keep": {Data: []byte("1"), Tuple: tup}}}}))
		if bug {
			require.Contains(t, s.Copy(f), "stale")
		} else {
			require.NotContains(t, s.Copy(f), "stale", "the owner's copy is the authority")
			require.Contains(t, s.Copy(f), "keep")
			require.Equal(t, uint64(1), s.Pruned)
		}
	}
}

// Validate takes every bound at its smallest valid value and refuses the
// one below it, bound by bound: a check off by one either way shows.
func TestValidateAtEveryBoundsEdge(t *testing.T) {
	smallest := Config{Permits: 1, Deadline: 1, AntiEntropy: 1, AdoptWait: 1, DefaultTTLMs: 1, MaxTTLMs: 1,
		MaxKeyBytes: 1, MaxValueBytes: 1, MaxFlowKeys: 1, MaxAEFlows: 1, AEPartitions: 1, MaxMoveFlows: 1}
	require.NoError(t, smallest.Validate())
	below := map[string]func(c *Config){
		"Permits":       func(c *Config) { c.Permits = -1 },
		"Deadline":      func(c *Config) { c.Deadline = -1 },
		"AntiEntropy":   func(c *Config) { c.AntiEntropy = -1 },
		"AdoptWait":     func(c *Config) { c.AdoptWait = -1 },
		"DefaultTTLMs":  func(c *Config) { c.DefaultTTLMs = -1 },
		"MaxKeyBytes":   func(c *Config) { c.MaxKeyBytes = -1 },
		"MaxValueBytes": func(c *Config) { c.MaxValueBytes = -1 },
		"MaxFlowKeys":   func(c *Config) { c.MaxFlowKeys = -1 },
		"MaxAEFlows":    func(c *Config) { c.MaxAEFlows = -1 },
		"AEPartitions":  func(c *Config) { c.AEPartitions = -1 },
		"MaxMoveFlows":  func(c *Config) { c.MaxMoveFlows = -1 },
	}
	for _, name := range slices.Sorted(maps.Keys(below)) {
		c := smallest
		below[name](&c)
		require.Error(t, c.Validate(), "%s below its smallest valid value", name)
	}
	most := smallest
	most.AEPartitions = 1 << 16
	require.NoError(t, most.Validate(), "65536 partitions is the most, and allowed")
	most.AEPartitions++
	require.Error(t, most.Validate())

	// The shard's MaxWait is at most a quarter of the Deadline, and
	// defaults to it.
	waits := Config{Deadline: 2 * time.Second}
	require.Equal(t, 500*time.Millisecond, waits.withDefaults().Shard.MaxWait)
	waits.Shard.MaxWait = 500 * time.Millisecond
	require.NoError(t, waits.Validate())
	waits.Shard.MaxWait++
	require.ErrorContains(t, waits.Validate(), "over a quarter of the deadline")
	require.Equal(t, time.Duration(1), smallest.withDefaults().Shard.MaxWait, "a deadline under 4ns still bounds the wait")
}

// An adoption nobody answers (every source down, none removed) asks
// every AdoptWait/4, and stops after maxAsks rounds: a bound on the
// frames one request can cause. It is then forgotten, so the next request
// starts over, asks again, and adopts once answered. Never forgotten, the
// flow stayed refused for good: the next request found its adoption
// filed at this m_idx, and started nothing.
func TestAnAdoptionNobodyAnswersStopsAskingAndStartsOverOnTheNextRequest(t *testing.T) {
	s, clk, net, _ := newTestStore(t, idA, Config{AdoptWait: time.Second})
	f := ownedBy(t, idA)
	asks := func() int {
		n := 0
		for _, fr := range net.frames {
			if fr.m.Kind == FrameAdopt && fr.m.Flow == f {
				n++
			}
		}
		return n
	}
	_, err, _ := do(s, Request{Flow: f, Op: OpGet, Key: "k"})
	require.ErrorIs(t, err, ErrNotAdopted)
	for i := 0; i < 2*maxAsks; i++ {
		clk.Advance(250 * time.Millisecond)
	}
	require.Equal(t, 2*maxAsks, asks(), "two sources, asked once at the start and every round until the bound")
	clk.Advance(time.Minute)
	require.Equal(t, 2*maxAsks, asks(), "no round past the bound")
	require.False(t, s.Adopted(f))

	net.frames = nil
	_, err, _ = do(s, Request{Flow: f, Op: OpGet, Key: "k"})
	require.ErrorIs(t, err, ErrNotAdopted)
	require.Equal(t, 2, asks(), "the next request starts over")
	answerAdoptions(s, net, f, nil)
	clk.Advance(time.Second)
	clk.Advance(0)
	require.True(t, s.Adopted(f))
}
