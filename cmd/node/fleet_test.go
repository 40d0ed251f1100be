package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/core/partition"
	"github.com/fenceline/fenceline/core/transport"
	"github.com/fenceline/fenceline/realnet"
)

// fleetView is the fleet section of a node's status.
type fleetView struct {
	Fleet *struct {
		Group   int `json:"group"`
		Control struct {
			Voters []struct {
				Name string `json:"name"`
			} `json:"voters"`
			Learners []struct {
				Name string `json:"name"`
			} `json:"learners"`
		} `json:"control"`
		Directory *struct {
			Epoch  uint64 `json:"epoch"`
			Groups []struct {
				MIdx       uint64   `json:"m_idx"`
				Voters     []string `json:"voters"`
				Partitions int      `json:"partitions"`
			} `json:"groups"`
		} `json:"directory"`
	} `json:"fleet"`
}

func (p *proc) fleetView() *fleetView {
	var st fleetView
	if !p.statusInto(&st) {
		return nil
	}
	return &st
}

// fleetOfTwo starts a fleet of two groups of three: n1 founds group 0
// (and the control group), n4 group 1; n2 and n3 join n1's group, n5 and
// n6 n4's. Node i listens on 127.0.0.i. It returns once every node's
// directory names both groups' three voters and every node follows the
// control group, five as its voters (node.ControlVoters), one a learner.
func fleetOfTwo(t testing.TB, extra ...string) []*proc {
	nodeBinary(t)
	root, ck, dk := keyedRoot(t)
	founders := "n1=127.0.0.1:25525=127.0.0.1:2525,n4=127.0.0.4:25525=127.0.0.4:2525"
	var ps []*proc
	for i := 1; i <= 6; i++ {
		name, ip := fmt.Sprintf("n%d", i), fmt.Sprintf("127.0.0.%d", i)
		group, founder := (i-1)/3, []string{"127.0.0.1:2525", "127.0.0.4:2525"}[(i-1)/3]
		args := []string{"-name", name, "-data-dir", filepath.Join(root, name), "-peer", ip + ":25525", "-http", ip + ":2525",
			"-control-key-file", ck, "-data-key-file", dk, "-fleet-founders", founders, "-fleet-group", fmt.Sprint(group)}
		if i != 1 && i != 4 {
			args = append(args, "-join", founder)
		}
		args = append(args, extra...)
		p := &proc{t: t, name: name, args: args, dir: root, http: ip + ":2525", stderr: &bytes.Buffer{}, mu: &sync.Mutex{}}
		p.start()
		ps = append(ps, p)
		t.Cleanup(p.kill)
	}
	for _, p := range ps {
		require.Eventually(t, func() bool {
			st := p.fleetView()
			if st == nil || st.Fleet == nil || st.Fleet.Directory == nil || len(st.Fleet.Control.Voters) != 5 || len(st.Fleet.Control.Learners) != 1 {
				return false
			}
			for _, g := range st.Fleet.Directory.Groups {
				if len(g.Voters) != 3 || g.Partitions != partition.Count/2 {
					return false
				}
			}
			return true
		}, 30*time.Second, 50*time.Millisecond, "%s's directory names both groups of three, and it votes in the control group:\n%s", p.name, p.log())
	}
	return ps
}

// Two groups of three real processes: an imposter created through one
// node is served by every node of both groups; flow operations through
// every node, on flows of both groups, while group 1's leader is killed
// and restarted, are linearizable flow by flow; a proxyOnce stub's origin
// hears each signature once, whichever nodes of either group the first
// requests reach; a node removed from group 1 leaves the control group
// too, and a removal through the wrong group is refused; a node started for one
// group that asks a member of the other to let it in is refused.
func TestTwoGroupsOfThreeProcesses(t *testing.T) {
	ps := fleetOfTwo(t)
	// The fleet's gauges: the directory every node routes by. (A scrape
	// the node's loop does not answer within a second has no core
	// gauges: asked again on a busy machine.)
	for _, p := range ps {
		require.Eventually(t, func() bool {
			return metric(p.http, "fenceline_fleet_directory_epoch") > 0 && metric(p.http, "fenceline_fleet_control_applied_index") > 0
		}, 10*time.Second, 100*time.Millisecond, "%s's directory epoch and control replica in its metrics", p.name)
	}
	// The load's flows fall in both groups.
	per := [2]int{}
	for i := range 6 {
		per[partition.Of(fmt.Sprintf("i4545:f%d", i)).Group(2)]++
	}
	require.NotZero(t, per[0], "a load flow in group 0")
	require.NotZero(t, per[1], "a load flow in group 1")

	// An imposter is the fleet's: created at n1, answered at n6.
	code, body := call("POST", "http://"+ps[0].http+"/imposters", `{"protocol": "http", "port": 4545, "stubs": [{"responses": [{"is": {"body": "one server"}}]}]}`)
	require.Equal(t, http.StatusCreated, code, body)
	for _, p := range ps {
		require.Eventually(t, func() bool {
			resp, err := httpClient.Get("http://" + strings.Replace(p.http, ":2525", ":4545", 1) + "/")
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			b := new(bytes.Buffer)
			_, _ = b.ReadFrom(resp.Body)
			return b.String() == "one server"
		}, 10*time.Second, 20*time.Millisecond, "%s serves the imposter created at n1", p.name)
	}
	// A proxy records once fleet-wide: its claims and recordings are the
	// control group's, whichever group's node a first request reaches.
	checkProxyOnce(t, ps)

	ld := startLoad(t, ps, false)
	ld.resumed("the start")
	leader := -1
	for i, p := range ps[3:] {
		if st := p.status(); st != nil && st.IsLeader {
			leader = 3 + i
		}
	}
	require.GreaterOrEqual(t, leader, 3, "group 1 has a leader")
	victim := ps[leader]
	victim.kill()
	t.Logf("killed %s, group 1's leader; operations went on after %v", victim.name, ld.resumed("killing "+victim.name))
	time.Sleep(time.Second)
	victim.start()
	ld.resumed("restarting " + victim.name)
	// Enough answered to judge, however slow the machine.
	require.Eventually(t, func() bool { return ld.count() > 300 }, 60*time.Second, 20*time.Millisecond, "300 operations answered")
	ld.finish(200)

	// A node of group 1 is removed through a member of its group, and
	// leaves the control group too; through group 0 it is refused.
	code, body = removeMember(t, ps[0].http, filepath.Join(ps[0].dir, "control.key"), "n6")
	require.Equal(t, http.StatusBadRequest, code, body)
	require.Contains(t, body, "n6 is a voter of group 1; this node is of group 0: remove it through a member of its group")
	code, body = removeMember(t, ps[3].http, filepath.Join(ps[0].dir, "control.key"), "n6")
	require.Equal(t, http.StatusOK, code, body)
	for _, p := range ps[:5] {
		require.Eventually(t, func() bool {
			st := p.fleetView()
			return st != nil && st.Fleet != nil && len(st.Fleet.Control.Voters) == 5 && len(st.Fleet.Control.Learners) == 0 && st.Fleet.Directory != nil &&
				len(st.Fleet.Directory.Groups[1].Voters) == 2
		}, 15*time.Second, 50*time.Millisecond, "%s: n6 out of group 1, of the directory and of the control group", p.name)
	}

	// n5 restarted without its fleet flags, or for another group, does
	// not start: it would serve flows its group does not hold.
	ps[4].kill()
	for _, drop := range [][]string{{"-fleet-founders", "-fleet-group"}, nil} {
		var args []string
		for i := 0; i < len(ps[4].args); i++ {
			switch a := ps[4].args[i]; {
			case drop != nil && (a == drop[0] || a == drop[1]):
				i++
			case drop == nil && a == "-fleet-group":
				args = append(args, a, "0")
				i++
			default:
				args = append(args, a)
			}
		}
		out, err := exec.Command(binPath, args...).CombinedOutput()
		require.Error(t, err, "n5 restarted with %v:\n%s", args, out)
		require.Contains(t, string(out), "holds a node of a fleet")
	}

	// A node started for group 0 that asks group 1 to let it in.
	out, err := exec.Command(binPath, "-name", "n7", "-data-dir", filepath.Join(ps[0].dir, "n7"), "-peer", "127.0.0.7:25525", "-http", "127.0.0.7:2525",
		"-control-key-file", filepath.Join(ps[0].dir, "control.key"), "-data-key-file", filepath.Join(ps[0].dir, "data.key"),
		"-fleet-founders", "n1=127.0.0.1:25525=127.0.0.1:2525,n4=127.0.0.4:25525=127.0.0.4:2525", "-fleet-group", "0", "-join", ps[3].http).CombinedOutput()
	require.Error(t, err, "a join through the wrong group fails:\n%s", out)
	require.Contains(t, string(out), "this node is of group 1; the joiner was started for group 0")
}

// A stateful imposter's scenarios across a fleet, each request sent to
// its flow's owner whole (-route forward), to the owner in the flow's own
// group or in the other: each order's steps go through a different node
// each time, and every node serves the one state of each order.
func TestAFleetForwardsStatefulRequests(t *testing.T) {
	ps := fleetOfTwo(t, "-route", "forward")
	code, body := call("POST", "http://"+ps[0].http+"/imposters", scenarioImposter)
	require.Equal(t, http.StatusCreated, code, body)
	for _, p := range ps {
		getImposter(t, p.http, 4545)
	}
	per := [2]int{}
	for i, id := range []string{"a", "b", "c", "d", "e", "f"} {
		per[partition.Of("i4545:"+id).Group(2)]++
		runOrder(t, id, func(k int) *proc { return ps[(i+k)%len(ps)] })
	}
	require.NotZero(t, per[0], "an order in group 0")
	require.NotZero(t, per[1], "an order in group 1")
}

// Every mistake in the fleet flags is a clear line at start, before any
// file is touched.
func TestFleetFlagsRefuseMistakes(t *testing.T) {
	two := "a1=127.0.0.1:7001=127.0.0.1:8001,b1=127.0.0.1:7004=127.0.0.1:8004"
	base := []string{"-name", "a1", "-peer", "127.0.0.1:7001", "-http", "127.0.0.1:8001"}
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"group without founders":   {[]string{"-fleet-group", "0"}, "-fleet-group and -fleet-add need -fleet-founders"},
		"add without founders":     {[]string{"-fleet-add"}, "-fleet-group and -fleet-add need -fleet-founders"},
		"add a founded group":      {[]string{"-fleet-founders", two, "-fleet-group", "1", "-fleet-add", "-join", "127.0.0.1:8004"}, "-fleet-add founds a group added to the fleet, numbered from 2"},
		"add with no one to ask":   {[]string{"-fleet-founders", two, "-fleet-group", "2", "-fleet-add"}, "-fleet-add asks a member of the fleet to add the group: give -join"},
		"malformed founder":        {[]string{"-fleet-founders", "a1=127.0.0.1:7001", "-fleet-group", "0"}, "want NAME=PEER=HTTP"},
		"bad founder address":      {[]string{"-fleet-founders", "a1=nowhere=127.0.0.1:8001", "-fleet-group", "0"}, "a1's peer address"},
		"a founder twice":          {[]string{"-fleet-founders", "a1=127.0.0.1:7001=127.0.0.1:8001,a1=127.0.0.1:7004=127.0.0.1:8004", "-fleet-group", "0"}, "a1 founds two groups"},
		"three groups":             {[]string{"-fleet-founders", two + ",c1=127.0.0.1:7007=127.0.0.1:8007", "-fleet-group", "0"}, "names 3 groups"},
		"no such group":            {[]string{"-fleet-founders", two, "-fleet-group", "64"}, "-fleet-group 64: want 0..1"},
		"an added group's founder": {[]string{"-fleet-founders", two, "-fleet-group", "2"}, "names a1 group 0's founder; -fleet-group is 2"},
		"no group":                 {[]string{"-fleet-founders", two}, "-fleet-group -1"},
		"founder of another":       {[]string{"-fleet-founders", two, "-fleet-group", "1"}, "names a1 group 0's founder; -fleet-group is 1"},
		"founder joins":            {[]string{"-fleet-founders", two, "-fleet-group", "0", "-join", "127.0.0.1:8004"}, "a founder does not -join"},
		"founder elsewhere":        {[]string{"-fleet-founders", "a1=127.0.0.1:7009=127.0.0.1:8001,b1=127.0.0.1:7004=127.0.0.1:8004", "-fleet-group", "0"}, "peer address as 127.0.0.1:7009"},
		"founder's HTTP":           {[]string{"-fleet-founders", "a1=127.0.0.1:7001=127.0.0.1:8009,b1=127.0.0.1:7004=127.0.0.1:8004", "-fleet-group", "0"}, "HTTP address as 127.0.0.1:8009"},
	} {
		_, err := parseFlags(append(append([]string(nil), base...), tc.args...), io.Discard)
		require.ErrorIs(t, err, errUsage, name)
		require.Contains(t, err.Error(), tc.want, name)
	}
	// A node that founds nothing joins.
	_, err := parseFlags([]string{"-name", "a2", "-peer", "127.0.0.1:7002", "-http", "127.0.0.1:8002", "-fleet-founders", two, "-fleet-group", "0"}, io.Discard)
	require.ErrorContains(t, err, "a2 is no founder in -fleet-founders: it joins its group")
	c, err := parseFlags([]string{"-name", "a2", "-peer", "127.0.0.1:7002", "-http", "127.0.0.1:8002", "-fleet-founders", two, "-fleet-group", "1", "-join", "127.0.0.1:8004"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, 1, c.fleet.Group)
	require.Len(t, c.fleet.Founders, 2)
	c, err = parseFlags(append(append([]string(nil), base...), "-fleet-founders", two, "-fleet-group", "0"), io.Discard)
	require.NoError(t, err)
	require.Equal(t, realnet.Founder{Name: "b1", Peer: "127.0.0.1:7004", HTTP: "127.0.0.1:8004"}, c.fleet.Founders[1])
	// A group added to the running fleet: its founder asks, through any
	// member; its other nodes join it through the founder.
	c, err = parseFlags([]string{"-name", "c1", "-peer", "127.0.0.1:7007", "-http", "127.0.0.1:8007", "-fleet-founders", two, "-fleet-group", "2", "-fleet-add", "-join", "127.0.0.1:8001"}, io.Discard)
	require.NoError(t, err)
	require.True(t, c.addGroup)
	require.Equal(t, realnet.FleetSpec{Group: 2, Founders: c.fleet.Founders, Added: true}, *c.fleet)
	c, err = parseFlags([]string{"-name", "c2", "-peer", "127.0.0.1:7008", "-http", "127.0.0.1:8008", "-fleet-founders", two, "-fleet-group", "2", "-join", "127.0.0.1:8007"}, io.Discard)
	require.NoError(t, err)
	require.False(t, c.addGroup)
	require.True(t, c.fleet.Added)
}

// A data dir stays in the fleet, and the group, it was first started in.
func TestADataDirKeepsItsFleet(t *testing.T) {
	two := "a1=127.0.0.1:7001=127.0.0.1:8001,b1=127.0.0.1:7004=127.0.0.1:8004"
	dir := t.TempDir()
	flags := func(extra ...string) config {
		c, err := parseFlags(append([]string{"-name", "a2", "-peer", "127.0.0.1:7002", "-http", "127.0.0.1:8002", "-data-dir", dir}, extra...), io.Discard)
		require.NoError(t, err)
		return c
	}
	g0 := flags("-fleet-founders", two, "-fleet-group", "0", "-join", "127.0.0.1:8001")
	require.NoError(t, keepFleet(g0, false), "the first start writes the fleet")
	require.NoError(t, keepFleet(g0, true), "a restart with the same flags")
	require.ErrorContains(t, keepFleet(flags(), true), "holds a node of a fleet (group=0 founders="+two+"): start it with the same")
	require.ErrorContains(t, keepFleet(flags("-fleet-founders", two, "-fleet-group", "1", "-join", "127.0.0.1:8004"), true),
		"holds a node of a fleet as group=0")

	plain := t.TempDir()
	c := flags()
	c.dataDir = plain
	require.NoError(t, keepFleet(c, true), "a node outside a fleet stays outside")
	g0.dataDir = plain
	require.ErrorContains(t, keepFleet(g0, true), "was started outside a fleet")
	_, err := os.Stat(filepath.Join(plain, fleetFile))
	require.ErrorIs(t, err, os.ErrNotExist, "nothing written for a refused start")
}

// resizeView is what a resize shows in a node's status.
type resizeView struct {
	Fleet *struct {
		Directory *struct {
			Epoch     uint64 `json:"epoch"`
			Target    int    `json:"target"`
			Moving    int    `json:"moving"`
			Misplaced int    `json:"misplaced"`
			Groups    []struct {
				Partitions int `json:"partitions"`
			} `json:"groups"`
		} `json:"directory"`
	} `json:"fleet"`
}

// resized waits until every node of ps holds a directory with target
// groups, nothing moving or misplaced, and the partitions spread as the
// table puts them for the target; it returns how long that took.
func resized(t *testing.T, ps []*proc, target int) time.Duration {
	start := time.Now()
	for _, p := range ps {
		var last string
		ok := assert.Eventually(t, func() bool {
			var st resizeView
			if !p.statusInto(&st) || st.Fleet == nil || st.Fleet.Directory == nil {
				return false
			}
			d := st.Fleet.Directory
			last = fmt.Sprintf("%+v", *d)
			if d.Target != target || d.Moving != 0 || d.Misplaced != 0 {
				return false
			}
			for g, gr := range d.Groups {
				if want := partition.Count / target; (g < target && gr.Partitions != want) || (g >= target && gr.Partitions != 0) {
					return false
				}
			}
			return true
		}, 60*time.Second, 20*time.Millisecond, "%s: every partition where the table puts it for %d groups", p.name, target)
		if !ok {
			t.Fatalf("%s's directory, last seen: %s\n%s", p.name, last, p.log())
		}
	}
	return time.Since(start)
}

// A fleet of two groups of three real processes resized to one group and
// back, through `node resize`, while eight clients call flows of both
// groups through every node: the history stays linearizable flow by flow
// (porcupine), every node ends with the partitions where the table puts
// them, and what the clients saw of each resize is logged (the longest
// stretch without an answer, the time to the last publication). A resize
// to a count the fleet cannot take, without the control key or with
// another key, changes nothing.
func TestAFleetResizesUnderLoad(t *testing.T) {
	ps := fleetOfTwo(t)
	ck := filepath.Join(ps[0].dir, "control.key")
	var out, errOut bytes.Buffer
	require.Equal(t, 1, runAdmin(resizeCall, []string{"-control-key-file", ck, "-via", ps[0].http, "4"}, &out, &errOut), "a fleet of two groups cannot spread over 4")
	require.Contains(t, errOut.String(), "answered 400")
	require.Contains(t, errOut.String(), "4 groups wanted, the fleet has 2")
	errOut.Reset()
	require.Equal(t, 2, runAdmin(resizeCall, []string{"-control-key-file", ck, "-via", ps[0].http, "none"}, &out, &errOut))
	code, body := call("PUT", "http://"+ps[0].http+"/_cluster/fleet/target", `{"groups": 1}`)
	require.Equal(t, http.StatusForbidden, code, body)
	wrong := filepath.Join(t.TempDir(), "wrong.key")
	require.NoError(t, os.WriteFile(wrong, bytes.Repeat([]byte{7}, 32), 0o600))
	errOut.Reset()
	require.Equal(t, 1, runAdmin(resizeCall, []string{"-control-key-file", wrong, "-via", ps[0].http, "1"}, &out, &errOut))
	require.Contains(t, errOut.String(), "answered 403")
	errOut.Reset()
	require.Equal(t, 2, runAdmin(resizeCall, []string{"-control-key-file", ck, "-print", "1"}, &out, &errOut), "-print needs -epoch")
	require.Contains(t, errOut.String(), "-print needs -epoch")
	resized(t, ps, 2) // nothing moved
	var st resizeView
	require.True(t, ps[0].statusInto(&st))
	before := st.Fleet.Directory.Epoch

	ld := startLoad(t, ps, false)
	ld.resumed("the start")
	for _, step := range []struct {
		groups int
		via    *proc
	}{{1, ps[4]}, {2, ps[1]}} {
		out.Reset()
		errOut.Reset()
		before := ld.count()
		ld.longestGap()
		require.Equal(t, 0, runAdmin(resizeCall, []string{"-control-key-file", ck, "-via", step.via.http, fmt.Sprint(step.groups)}, &out, &errOut), errOut.String())
		took := resized(t, ps, step.groups)
		t.Logf("resize to %d group(s) through %s: every node held the final directory after %v; %d operations answered meanwhile, the longest stretch without one %v",
			step.groups, step.via.name, took, ld.count()-before, ld.longestGap())
		ld.resumed(fmt.Sprintf("the resize to %d", step.groups))
	}
	require.Eventually(t, func() bool { return ld.count() > 300 }, 60*time.Second, 20*time.Millisecond, "300 operations answered")
	ld.finish(200)

	// A resize attested against the directory before the two above, as
	// one captured then and sent again now would be: refused on every
	// member, with the epoch to attest against, and nothing moves.
	out.Reset()
	require.Equal(t, 0, runAdmin(resizeCall, []string{"-control-key-file", ck, "-print", "-epoch", fmt.Sprint(before), "1"}, &out, &errOut), errOut.String())
	att, err := transport.ParseAttestation(strings.TrimSpace(out.String()))
	require.NoError(t, err)
	for _, p := range ps {
		code, answer, err := askAttested(p.http, http.MethodPut, "/_cluster/fleet/target", []byte(fmt.Sprintf(`{"groups":1,"epoch":%d}`, before)), att)
		require.NoError(t, err)
		require.Equal(t, http.StatusConflict, code, answer)
		var r staleRefusal
		require.NoError(t, json.Unmarshal([]byte(answer), &r), answer)
		require.Equal(t, "stale", r.Reason, answer)
		require.Greater(t, r.Epoch, before, answer)
	}
	resized(t, ps, 2)
}

// A fleet founded with one group of three grows by a second group of
// three new processes, added while eight clients call flows through the
// first group's nodes: n4 founds group 1 with -fleet-add through n1, n5
// and n6 join it through n4, and every node's directory names it,
// holding nothing. `node resize 2` then moves half the partitions onto
// it while the clients, from then on through all six nodes, go on; the
// history stays linearizable flow by flow (porcupine). A group asked for
// out of turn, or without the control key, is refused and added
// nothing.
func TestAFleetGrowsByAnAddedGroup(t *testing.T) {
	nodeBinary(t)
	root, ck, dk := keyedRoot(t)
	founders := "n1=127.0.0.1:25525=127.0.0.1:2525"
	start := func(i, group int, extra ...string) *proc {
		name, ip := fmt.Sprintf("n%d", i), fmt.Sprintf("127.0.0.%d", i)
		args := append([]string{"-name", name, "-data-dir", filepath.Join(root, name), "-peer", ip + ":25525", "-http", ip + ":2525",
			"-control-key-file", ck, "-data-key-file", dk, "-fleet-founders", founders, "-fleet-group", fmt.Sprint(group)}, extra...)
		p := &proc{t: t, name: name, args: args, dir: root, http: ip + ":2525", stderr: &bytes.Buffer{}, mu: &sync.Mutex{}}
		p.start()
		t.Cleanup(p.kill)
		return p
	}
	// groups waits until every node of ps holds a directory of len(sizes)
	// groups, group g with sizes[g] voters, every partition still in
	// group 0.
	groups := func(ps []*proc, sizes ...int) {
		for _, p := range ps {
			require.Eventually(t, func() bool {
				st := p.fleetView()
				if st == nil || st.Fleet == nil || st.Fleet.Directory == nil || len(st.Fleet.Directory.Groups) != len(sizes) {
					return false
				}
				for g, gr := range st.Fleet.Directory.Groups {
					if len(gr.Voters) != sizes[g] || (g == 0) != (gr.Partitions == partition.Count) {
						return false
					}
				}
				return true
			}, 30*time.Second, 50*time.Millisecond, "%s's directory names groups of %v voters, every partition in group 0:\n%s", p.name, sizes, p.log())
		}
	}
	ps := []*proc{start(1, 0)}
	ps = append(ps, start(2, 0, "-join", "127.0.0.1:2525"), start(3, 0, "-join", "127.0.0.1:2525"))
	groups(ps, 3)
	ld := startLoad(t, ps, false)
	ld.resumed("the start")

	// Not through the raw KV API: the directory is the fleet's own.
	code, body := call("PUT", "http://127.0.0.2:2525/_cluster/kv/fleet%2Fdirectory", `{"value": "a directory"}`)
	require.Equal(t, http.StatusForbidden, code, body)
	// No attestation, then a group out of turn: the fleet's next is 1.
	code, body = call("POST", "http://127.0.0.1:2525/_cluster/fleet/groups", `{"name": "n9", "peer": "127.0.0.9:25525", "group": 1, "mIdx": 1}`)
	require.Equal(t, http.StatusForbidden, code, body)
	name, ip := "n9", "127.0.0.9"
	bad := exec.Command(binPath, "-name", name, "-data-dir", filepath.Join(root, name), "-peer", ip+":25525", "-http", ip+":2525",
		"-control-key-file", ck, "-data-key-file", dk, "-fleet-founders", founders, "-fleet-group", "2", "-fleet-add", "-join", "127.0.0.2:2525")
	var badErr bytes.Buffer
	bad.Stderr = &badErr
	require.Error(t, bad.Run(), "a group out of turn is refused, and its founder exits")
	require.Contains(t, badErr.String(), "group 2 asked for, the fleet's next is 1")

	before := ld.count()
	added := time.Now()
	ps = append(ps, start(4, 1, "-fleet-add", "-join", "127.0.0.1:2525"))
	ps = append(ps, start(5, 1, "-join", "127.0.0.4:2525"), start(6, 1, "-join", "127.0.0.4:2525"))
	groups(ps, 3, 3)
	t.Logf("group 1 added and grown to three in %v; %d operations answered meanwhile", time.Since(added), ld.count()-before)
	ld.add(ps[3].http, ps[4].http, ps[5].http)
	ld.resumed("the group's addition")

	var out, errOut bytes.Buffer
	before = ld.count()
	ld.longestGap()
	require.Equal(t, 0, runAdmin(resizeCall, []string{"-control-key-file", ck, "-via", ps[4].http, "2"}, &out, &errOut), errOut.String())
	took := resized(t, ps, 2)
	t.Logf("resize onto the added group: every node held the final directory after %v; %d operations answered meanwhile, the longest stretch without one %v",
		took, ld.count()-before, ld.longestGap())
	ld.resumed("the resize to 2")
	require.Eventually(t, func() bool { return ld.count() > before+300 }, 60*time.Second, 20*time.Millisecond, "300 operations answered after the resize")
	ld.finish(200)
}
