package node_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/core/consensus"
	"github.com/fenceline/fenceline/core/fleet"
	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/core/kv"
	"github.com/fenceline/fenceline/core/node"
	"github.com/fenceline/fenceline/core/partition"
	"github.com/fenceline/fenceline/core/transport"
	"github.com/fenceline/fenceline/dial"
	"github.com/fenceline/fenceline/netsim"
	"github.com/fenceline/fenceline/sim"
)

// oneNodeFleet is a fleet of one group of one node, which is also the
// control group's one voter.
func oneNodeFleet(name string) node.Config {
	boot := []consensus.Member{consensus.NewMember(name, name+":7000")}
	data := consensus.Config{Name: name, Addr: name + ":7000", Bootstrap: boot}
	return node.Config{
		Consensus: data,
		Fleet: &node.FleetConfig{
			Founding: []fleet.Group{{MIdx: 1, Voters: []fleet.Member{{ID: dial.IDFromName(name), Name: name, Peer: name + ":7000"}}}},
			Control:  consensus.Config{Name: name, Addr: name + ":7000", Bootstrap: boot},
		},
		AdminKeys: transport.Keys{Control: controlKey},
	}
}

// controlKey is the test fleets' control key, whose attestations decide
// their admin acts.
var controlKey = bytes.Repeat([]byte{7}, transport.KeySize)

// nonces numbers the tests' attestations: each its own nonce.
var nonces uint64

// attest is the control key's attestation of act with fields, made at at
// by k's true time (the operator's clock), with a nonce of its own: its
// text form, as a node is handed it.
func attest(k *sim.Kernel, key []byte, act string, fields []string, at time.Duration) string {
	var nonce [transport.AttestNonceSize]byte
	nonces++
	binary.BigEndian.PutUint64(nonce[:], nonces)
	a, err := transport.Keys{Control: key}.Attest(act, fields, sim.Epoch.Add(at), nonce)
	if err != nil {
		panic(err)
	}
	return a.String()
}

// resize asks nd, on m, to resize to target, attested now against the
// directory nd holds; done gets the answer.
func resize(k *sim.Kernel, m *sim.Machine, nd *node.Node, target int, done func(error)) {
	m.Exec(func() {
		var epoch uint64
		if d := nd.Directory(); d != nil {
			epoch = d.Epoch()
		}
		nd.Resize(target, epoch, attest(k, controlKey, transport.ActResize, node.ResizeFields(target, epoch), k.Now()), done)
	})
}

// startOneNodeFleet starts node a, a fleet of one (oneNodeFleet), on a
// simulated kernel: the kernel, its machine, and its node (the machine's
// first incarnation).
func startOneNodeFleet(t *testing.T) (*sim.Kernel, *sim.Machine, *node.Node) {
	k := sim.New(1)
	t.Cleanup(k.InstallCryptoRand())
	nw := netsim.New(k, netsim.DefaultConfig)
	var nd *node.Node
	m := k.AddMachine("a", func(env *sim.Env) dial.Handler {
		var err error
		nd, err = node.Open(oneNodeFleet("a"), node.Env{Clock: env.Clock, Net: env.Net, FS: env.Disk, Rand: env.Rand})
		require.NoError(t, err)
		return nd
	}, nw, sim.DefaultDiskConfig)
	m.Start()
	return k, m, nd
}

// The control group's leader founds the directory, the node reads it
// from its replica, and a value that does not decode leaves it with no
// directory (every flow refused) rather than one it cannot read.
func TestTheDirectoryComesFromTheControlGroup(t *testing.T) {
	k, m, nd := startOneNodeFleet(t)
	require.NoError(t, k.RunUntil(2*time.Second))

	e, ok := nd.Control.LocalGet(node.DirectoryKey)
	require.True(t, ok, "the control group's leader founded the directory")
	d, err := fleet.Decode(e.Value)
	require.NoError(t, err)
	require.Equal(t, uint64(1), d.Epoch())
	require.True(t, d.Holds(0, "any flow"), "one group holds every partition")
	require.Equal(t, d, nd.Directory(), "the flow store's view is the replica's")

	m.Exec(func() {
		nd.Control.Propose(kv.Put(node.DirectoryKey, []byte("not a directory")), func(kv.Result, error) {})
	})
	require.NoError(t, k.RunUntil(3*time.Second))
	require.Nil(t, nd.Directory(), "a directory that does not decode is no directory")
	require.NoError(t, nd.CheckInvariants())
}

func TestFleetConfigRefusals(t *testing.T) {
	for name, edit := range map[string]func(*node.Config){
		"group 1 of 1":                      func(c *node.Config) { c.Fleet.Group = 1 },
		"founding groups":                   func(c *node.Config) { c.Fleet.Founding = nil },
		"would share a file":                func(c *node.Config) { c.Fleet.Control.JournalName = "raft.journal" },
		"the control replica is named":      func(c *node.Config) { c.Fleet.Control.Name = "b" },
		"an added group is numbered from 1": func(c *node.Config) { c.Fleet.Added = true },
		"PublishEvery must be positive": func(c *node.Config) {
			c.Fleet.PublishEvery = -time.Second
		},
		"need the control key": func(c *node.Config) { c.AdminKeys = transport.Keys{} },
	} {
		cfg := oneNodeFleet("a")
		cfg.Consensus.JournalName = "raft.journal"
		edit(&cfg)
		_, err := node.Open(cfg, node.Env{})
		require.ErrorContains(t, err, name)
	}
}

// Resize commits a target the fleet can take, and refuses, once, with a
// reason, one it cannot (more groups than founded, not a power of two)
// and any before the node holds a directory.
func TestResizeAnswersOnce(t *testing.T) {
	k, m, nd := startOneNodeFleet(t)
	answers := map[int][]error{}
	ask := func(target int) {
		resize(k, m, nd, target, func(err error) { answers[target] = append(answers[target], err) })
	}
	ask(1) // before the directory is founded
	require.Equal(t, []error{node.ErrNoDirectory}, answers[1])
	delete(answers, 1)
	require.NoError(t, k.RunUntil(2*time.Second))
	for _, target := range []int{1, 2, 3} {
		ask(target)
	}
	require.NoError(t, k.RunUntil(3*time.Second))
	require.Len(t, answers[1], 1)
	require.NoError(t, answers[1][0])
	require.Len(t, answers[2], 1)
	require.ErrorIs(t, answers[2][0], fleet.ErrInvalid)
	require.ErrorContains(t, answers[2][0], "2 groups wanted, the fleet has 1")
	require.Len(t, answers[3], 1)
	require.ErrorIs(t, answers[3][0], fleet.ErrInvalid)
	require.Equal(t, 1, nd.Directory().Target())
	require.NoError(t, nd.CheckInvariants())
}

// AddGroup adds the fleet's next group, holding nothing, and answers
// once: nil again for the same group asked again (an answer lost), a
// refusal for a number out of turn or a voter of another group. A
// resize then moves partitions to the added group, but never the batch
// of a flow written before it while the group's voter (no process runs
// b here) cannot take its copy: the group is never handed state it has
// not been given. (Batches with no flows have nothing to copy, and move.)
func TestAddGroupAddsAGroupThatHoldsNothing(t *testing.T) {
	k, m, nd := startOneNodeFleet(t)
	member := func(name string) fleet.Member {
		return fleet.Member{ID: dial.IDFromName(name), Name: name, Peer: name + ":7000"}
	}
	var answers []error
	add := func(g int, names ...string) {
		gr := fleet.Group{MIdx: 1}
		for _, n := range names {
			gr.Voters = append(gr.Voters, member(n))
		}
		m.Exec(func() {
			nd.AddGroup(g, gr, attest(k, controlKey, transport.ActAddGroup, node.AddGroupFields(g, gr), k.Now()), func(err error) { answers = append(answers, err) })
		})
	}
	add(1, "b")
	require.Equal(t, []error{node.ErrNoDirectory}, answers, "before the directory is founded")
	require.NoError(t, k.RunUntil(2*time.Second))
	answers = nil
	add(1, "b")
	require.NoError(t, k.RunUntil(3*time.Second))
	require.Equal(t, []error{nil}, answers)
	d := nd.Directory()
	require.Equal(t, []int{2, 1, 1}, []int{d.Groups(), d.Founded(), d.Target()})
	for p := range 16 {
		g, _ := d.Holder(partition.Partition(p))
		require.Zero(t, g, "the added group holds nothing")
	}

	answers = nil
	add(1, "b")      // asked again: added already
	add(1, "c")      // another group 1
	add(3, "c")      // out of turn
	add(2, "a")      // a voter of group 0
	add(2, "c", "c") // a voter twice
	require.NoError(t, k.RunUntil(4*time.Second))
	require.Len(t, answers, 5)
	require.NoError(t, answers[0])
	require.ErrorIs(t, answers[1], node.ErrGroupNumber)
	require.ErrorIs(t, answers[2], node.ErrGroupNumber)
	require.ErrorIs(t, answers[3], fleet.ErrInvalid)
	require.ErrorIs(t, answers[4], fleet.ErrInvalid)
	require.Equal(t, 2, nd.Directory().Groups())

	// A flow whose partition moves to group 1.
	f := "i8080:added"
	for i := 0; partition.GroupOf(f, 2) != 1; i++ {
		f = fmt.Sprintf("i8080:added-%d", i)
	}
	var wrote []error
	m.Exec(func() {
		nd.Flow.Do(flow.Request{Flow: f, Op: flow.OpSet, Key: "k", Value: []byte("v")}, func(_ flow.Response, err error) { wrote = append(wrote, err) })
	})
	require.NoError(t, k.RunUntil(6*time.Second))
	require.Equal(t, []error{nil}, wrote)
	var resized []error
	resize(k, m, nd, 2, func(err error) { resized = append(resized, err) })
	require.NoError(t, k.RunUntil(12*time.Second))
	require.Equal(t, []error{nil}, resized)
	d = nd.Directory()
	from, to, _, moving := d.Moving(partition.Of(f))
	require.True(t, moving, "the written flow's batch is fenced and stays so")
	require.Equal(t, []int{0, 1}, []int{from, to})
	ps, _, _ := d.Misplaced(partition.Count)
	require.Less(t, len(ps), partition.Count/2-node.MoveBatch, "empty batches moved before it")
	require.NoError(t, nd.CheckInvariants())
}

// A fleet's admin acts are the control key's word, checked on the node
// by its clock: Resize and AddGroup refuse an attestation made with
// another key, for another act or other fields, made too long ago or
// too far ahead, or no attestation at all, and a resize attested
// against an older directory (one replayed after a later change) or a
// newer one than the node holds. Each refusal changes nothing.
func TestAdminActsNeedTheControlKeysWord(t *testing.T) {
	k, m, nd := startOneNodeFleet(t)
	require.NoError(t, k.RunUntil(2*time.Second))
	var e0 uint64
	m.Exec(func() { e0 = nd.Directory().Epoch() })
	other := bytes.Repeat([]byte{8}, transport.KeySize)
	now := k.Now()
	fields := node.ResizeFields(1, e0)
	cases := []struct {
		name  string
		epoch uint64
		att   string
		want  error
	}{
		{"another key", e0, attest(k, other, transport.ActResize, fields, now), transport.ErrAttestation},
		{"another act", e0, attest(k, controlKey, transport.ActRemove, fields, now), transport.ErrAttestation},
		{"another target", e0, attest(k, controlKey, transport.ActResize, node.ResizeFields(2, e0), now), transport.ErrAttestation},
		{"another epoch", e0, attest(k, controlKey, transport.ActResize, node.ResizeFields(1, e0+1), now), transport.ErrAttestation},
		{"made too long ago", e0, attest(k, controlKey, transport.ActResize, fields, now-transport.AttestValidity-transport.AttestSkew-time.Second), transport.ErrAttestationExpired},
		{"made too far ahead", e0, attest(k, controlKey, transport.ActResize, fields, now+transport.AttestSkew+time.Second), transport.ErrAttestationExpired},
		{"no attestation", e0, "", node.ErrNotAttested},
		{"a newer directory", e0 + 1, attest(k, controlKey, transport.ActResize, node.ResizeFields(1, e0+1), now), node.ErrAttestationAhead},
	}
	for _, c := range cases {
		var got []error
		m.Exec(func() { nd.Resize(1, c.epoch, c.att, func(err error) { got = append(got, err) }) })
		require.Len(t, got, 1, c.name)
		require.ErrorIs(t, got[0], c.want, c.name)
	}
	var added []error
	gr := fleet.Group{MIdx: 1, Voters: []fleet.Member{{ID: dial.IDFromName("b"), Name: "b", Peer: "b:7000"}}}
	m.Exec(func() {
		nd.AddGroup(1, gr, attest(k, controlKey, transport.ActAddGroup, node.AddGroupFields(2, gr), now), func(err error) { added = append(added, err) })
	})
	require.Len(t, added, 1)
	require.ErrorIs(t, added[0], transport.ErrAttestation, "attested for group 2, asked for 1")
	require.NoError(t, k.RunUntil(3*time.Second))
	require.Equal(t, e0, nd.Directory().Epoch(), "no refusal changed the directory")

	// A good resize, then the same attestation again: the fleet has
	// changed since, so it changes nothing, here or anywhere.
	good := attest(k, controlKey, transport.ActResize, fields, k.Now())
	var got []error
	m.Exec(func() { nd.Resize(1, e0, good, func(err error) { got = append(got, err) }) })
	require.NoError(t, k.RunUntil(4*time.Second))
	require.Equal(t, []error{nil}, got)
	e1 := nd.Directory().Epoch()
	require.Greater(t, e1, e0)
	m.Exec(func() { nd.Resize(1, e0, good, func(err error) { got = append(got, err) }) })
	require.Len(t, got, 2)
	require.ErrorIs(t, got[1], transport.ErrAttestationUsed, "taken here before")
	// As another node would see it: a nonce it never took, but an epoch
	// the fleet has left.
	m.Exec(func() {
		nd.Resize(1, e0, attest(k, controlKey, transport.ActResize, fields, k.Now()), func(err error) { got = append(got, err) })
	})
	require.Len(t, got, 3)
	require.ErrorIs(t, got[2], node.ErrAttestationStale)
	var v *node.VersionError
	require.ErrorAs(t, got[2], &v)
	require.Equal(t, []uint64{e0, e1}, []uint64{v.At, v.Now})
	require.NoError(t, k.RunUntil(5*time.Second))
	require.Equal(t, e1, nd.Directory().Epoch())
	require.NoError(t, nd.CheckInvariants())
}

// Join and Remove take the control key's word for exactly that node at
// exactly the membership index they change: a join of a member is
// answered once confirmed with a quorum (here, at once: one voter), one
// asked of a member of another group (or from
// outside the fleet) is refused, and a join captured and sent again
// after the node was removed (with a nonce this node never took, as
// another member would see it) adds nothing.
func TestJoinAndRemoveAreAttestedAtAnIndex(t *testing.T) {
	k, m, nd := startOneNodeFleet(t)
	require.NoError(t, k.RunUntil(2*time.Second))
	b := consensus.NewMember("b", "b:7000")
	var answers []error
	join := func(group int, index uint64, att string) {
		m.Exec(func() { nd.Join(b, group, index, att, func(err error) { answers = append(answers, err) }) })
	}
	idx := nd.Consensus.Membership().Index
	join(0, idx, attest(k, controlKey, transport.ActJoin, node.JoinFields(b, idx+1), k.Now()))
	join(1, idx, attest(k, controlKey, transport.ActJoin, node.JoinFields(b, idx), k.Now()))
	join(node.NoGroup, idx, attest(k, controlKey, transport.ActJoin, node.JoinFields(b, idx), k.Now()))
	join(0, idx+1, attest(k, controlKey, transport.ActJoin, node.JoinFields(b, idx+1), k.Now()))
	require.Len(t, answers, 4)
	require.ErrorIs(t, answers[0], transport.ErrAttestation, "attested at another index")
	require.ErrorIs(t, answers[1], node.ErrWrongGroup)
	require.ErrorIs(t, answers[2], node.ErrWrongGroup)
	require.ErrorIs(t, answers[3], node.ErrAttestationAhead)

	answers = nil
	good := attest(k, controlKey, transport.ActJoin, node.JoinFields(b, idx), k.Now())
	join(0, idx, good)
	require.NoError(t, k.RunUntil(3*time.Second))
	require.Equal(t, []error{nil}, answers)
	ms := nd.Consensus.Membership()
	require.Len(t, ms.Learners, 1, "b joined as a learner")
	join(0, idx, good)
	require.ErrorIs(t, answers[1], transport.ErrAttestationUsed)
	join(0, idx, attest(k, controlKey, transport.ActJoin, node.JoinFields(b, idx), k.Now()))
	require.NoError(t, answers[2], "a member asking again is answered")

	var removed []error
	m.Exec(func() {
		nd.Remove("b", ms.Index, attest(k, controlKey, transport.ActRemove, node.RemoveFields("b", ms.Index), k.Now()), func(err error) { removed = append(removed, err) })
	})
	require.NoError(t, k.RunUntil(4*time.Second))
	require.Equal(t, []error{nil}, removed)
	require.Empty(t, nd.Consensus.Membership().Learners)
	join(0, idx, attest(k, controlKey, transport.ActJoin, node.JoinFields(b, idx), k.Now()))
	require.ErrorIs(t, answers[3], node.ErrAttestationStale, "a removed node's join, sent again")
	require.NoError(t, k.RunUntil(5*time.Second))
	require.Empty(t, nd.Consensus.Membership().Learners)
	require.NoError(t, nd.CheckInvariants())
}
