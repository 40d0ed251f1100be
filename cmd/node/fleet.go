package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/fenceline/fenceline/core/fleet"
	"github.com/fenceline/fenceline/core/partition"
	"github.com/fenceline/fenceline/realnet"
)

// A fleet of raft groups (README, "A fleet of groups"):
//
//	node -name a1 -peer 127.0.0.1:7001 -http 127.0.0.1:8001 \
//	     -fleet-founders a1=127.0.0.1:7001=127.0.0.1:8001,b1=127.0.0.1:7004=127.0.0.1:8004 -fleet-group 0
//	node -name a2 ... -fleet-founders <the same> -fleet-group 0 -join 127.0.0.1:8001
//
// Each group has one founder, named in -fleet-founders in group order;
// every other node joins its group through a member of it. Group 0's
// founder also founds the control group, which holds the group directory
// and everything the fleet shares (imposters, recordings, the KV API);
// every node follows it.
//
// A group is added to the running fleet by its founder:
//
//	node -name c1 ... -fleet-founders <the same> -fleet-group 2 -fleet-add -join 127.0.0.1:8001
//	node -name c2 ... -fleet-founders <the same> -fleet-group 2 -join <c1's HTTP address>
//
// c1 founds group 2's raft group alone and asks the member at -join (of
// any group) to add it (node.Node.AddGroup, with the control key's
// attestation); the group holds nothing until `node resize` moves
// partitions to it. Groups are added in number order: the fleet's next
// group is the only one it takes.

// parseFleet reads -fleet-founders and -fleet-group against the node's
// other flags: nil without them.
func parseFleet(founders string, group int, add bool, c config) (*realnet.FleetSpec, error) {
	if founders == "" {
		if group != -1 || add {
			return nil, errors.New("-fleet-group and -fleet-add need -fleet-founders")
		}
		return nil, nil
	}
	var spec realnet.FleetSpec
	seen := map[string]bool{}
	for _, entry := range strings.Split(founders, ",") {
		parts := strings.Split(strings.TrimSpace(entry), "=")
		if len(parts) != 3 || parts[0] == "" {
			return nil, fmt.Errorf("-fleet-founders: %q: want NAME=PEER=HTTP", entry)
		}
		f := realnet.Founder{Name: parts[0], Peer: parts[1], HTTP: parts[2]}
		if seen[f.Name] {
			return nil, fmt.Errorf("-fleet-founders: %s founds two groups (a node belongs to one)", f.Name)
		}
		seen[f.Name] = true
		if _, _, err := net.SplitHostPort(f.Peer); err != nil {
			return nil, fmt.Errorf("-fleet-founders: %s's peer address %q: %v", f.Name, f.Peer, err)
		}
		if _, _, err := net.SplitHostPort(strings.TrimPrefix(f.HTTP, "https://")); err != nil {
			return nil, fmt.Errorf("-fleet-founders: %s's HTTP address %q: %v", f.Name, f.HTTP, err)
		}
		spec.Founders = append(spec.Founders, f)
	}
	if err := partition.Compatible(len(spec.Founders)); err != nil {
		return nil, fmt.Errorf("-fleet-founders names %d groups: %v", len(spec.Founders), err)
	}
	switch {
	case group < 0 || group >= fleet.MaxGroups:
		return nil, fmt.Errorf("-fleet-group %d: want 0..%d, the node's group among -fleet-founders' (or one added after them, to %d)", group, len(spec.Founders)-1, fleet.MaxGroups-1)
	case add && group < len(spec.Founders):
		return nil, fmt.Errorf("-fleet-add founds a group added to the fleet, numbered from %d (the founders' count); group %d is -fleet-founders'", len(spec.Founders), group)
	case add && c.join == "":
		return nil, errors.New("-fleet-add asks a member of the fleet to add the group: give -join its HTTP address")
	}
	spec.Group, spec.Added = group, group >= len(spec.Founders)
	advertised := c.peer
	if c.advertise != "" {
		advertised = c.advertise
	}
	for g, f := range spec.Founders {
		if f.Name != c.name {
			continue
		}
		switch {
		case g != group:
			return nil, fmt.Errorf("-fleet-founders names %s group %d's founder; -fleet-group is %d", c.name, g, group)
		case c.join != "":
			return nil, fmt.Errorf("%s founds group %d (-fleet-founders): a founder does not -join", c.name, g)
		case f.Peer != advertised:
			return nil, fmt.Errorf("-fleet-founders gives %s's peer address as %s; it listens on (or advertises) %s", c.name, f.Peer, advertised)
		case strings.TrimPrefix(f.HTTP, "https://") != c.http:
			return nil, fmt.Errorf("-fleet-founders gives %s's HTTP address as %s; -http is %s", c.name, f.HTTP, c.http)
		}
		return &spec, nil
	}
	if c.join == "" {
		return nil, fmt.Errorf("%s is no founder in -fleet-founders: it joins its group through a member of it (-join)", c.name)
	}
	return &spec, nil
}

// fleetFile, in the data dir, is the fleet the node was first started
// in: its group and the founders, as the flags gave them.
const fleetFile = "fleet"

// keepFleet holds a data dir to the fleet it was first started in. A node
// of a fleet restarted without its fleet flags would take its group for
// the whole fleet, and serve every flow (another group's too) from its
// own group's copies; one restarted with another group would serve
// flows its group does not hold. So the first start writes the fleet's
// flags to the data dir, and every later start must give the same ones,
// or none for a node that never was in a fleet.
func keepFleet(c config, restarted bool) error {
	path := filepath.Join(c.dataDir, fleetFile)
	want := ""
	if c.fleet != nil {
		var fs []string
		for _, f := range c.fleet.Founders {
			fs = append(fs, f.Name+"="+f.Peer+"="+f.HTTP)
		}
		want = fmt.Sprintf("group=%d founders=%s\n", c.fleet.Group, strings.Join(fs, ","))
	}
	had, err := os.ReadFile(path)
	switch {
	case err == nil && string(had) == want:
		return nil
	case err == nil && want == "":
		return fmt.Errorf("%s holds a node of a fleet (%s): start it with the same -fleet-founders and -fleet-group", c.dataDir, strings.TrimSpace(string(had)))
	case err == nil:
		return fmt.Errorf("%s holds a node of a fleet as %s, not %s: a node stays in the group it was first started in", c.dataDir, strings.TrimSpace(string(had)), strings.TrimSpace(want))
	case !errors.Is(err, os.ErrNotExist):
		return err
	case want == "":
		return nil
	case restarted:
		return fmt.Errorf("%s holds a node that was started outside a fleet: it cannot join one (start a fresh data dir)", c.dataDir)
	}
	if err := os.MkdirAll(c.dataDir, 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(want), 0o600)
}
