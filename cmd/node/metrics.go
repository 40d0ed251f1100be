package main

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fenceline/fenceline/core/node"
	"github.com/fenceline/fenceline/core/transport"
	"github.com/fenceline/fenceline/realnet"
)

// collector reads the node's counters on each scrape, through its loop
// (bounded: a node too busy to answer within a second is scraped without
// its core metrics, and says so in fenceline_scrape_core_ok).
type collector struct {
	nd *realnet.Node
	a  *api
}

var (
	descScrapeOK    = prometheus.NewDesc("fenceline_scrape_core_ok", "1 if the node's loop answered this scrape in time.", nil, nil)
	descTerm        = prometheus.NewDesc("fenceline_raft_term", "The raft term.", nil, nil)
	descCommit      = prometheus.NewDesc("fenceline_raft_commit_index", "The raft commit index.", nil, nil)
	descApplied     = prometheus.NewDesc("fenceline_raft_applied_index", "The raft applied index.", nil, nil)
	descIsLeader    = prometheus.NewDesc("fenceline_raft_is_leader", "1 if the node leads with a quorum's recent acknowledgement.", nil, nil)
	descIsolated    = prometheus.NewDesc("fenceline_isolated", "1 if the node is isolated (D-17): it serves no owned flow.", nil, nil)
	descIsolatedSec = prometheus.NewDesc("fenceline_isolated_seconds_total", "Time the node has spent isolated since it started (sampled every 100ms).", nil, nil)
	descTerms       = prometheus.NewDesc("fenceline_raft_terms_total", "Terms this node has seen begin since it started: elections in the cluster.", nil, nil)
	descMIdx        = prometheus.NewDesc("fenceline_membership_index", "m_idx: the index of the membership entry in force.", nil, nil)
	descPermits     = prometheus.NewDesc("fenceline_bridge_permits_in_use", "Bridge permits held by calls in flight.", nil, nil)
	descShed        = prometheus.NewDesc("fenceline_bridge_shed_total", "Calls shed at the bridge for want of a permit.", nil, nil)
	descServed      = prometheus.NewDesc("fenceline_flow_served_total", "Flow operations this node served as owner.", nil, nil)
	descFsyncs      = prometheus.NewDesc("fenceline_shard_fsyncs_total", "Flow shard fsyncs.", nil, nil)
	descBatches     = prometheus.NewDesc("fenceline_shard_batches_total", "Flow shard backend writes.", nil, nil)
	descPuts        = prometheus.NewDesc("fenceline_shard_puts_total", "Flow shard puts (a batch holds one or more).", nil, nil)
	descLive        = prometheus.NewDesc("fenceline_shard_live_flows", "Flows held by the shard.", nil, nil)
	descEnvDropped  = prometheus.NewDesc("fenceline_transport_frames_rejected_total", "Frames the envelope dropped, by cause.", []string{"cause"}, nil)
	descTCPRejected = prometheus.NewDesc("fenceline_tcp_rejected_total", "Peer connections and frames refused, by cause.", []string{"cause"}, nil)
	descFrames      = prometheus.NewDesc("fenceline_tcp_frames_total", "Frames over TCP, by direction.", []string{"direction"}, nil)
	descRefused     = prometheus.NewDesc("fenceline_http_refused_total", "HTTP API calls and connections refused, by cause: unauthorized (no API key), host and origin (browser attacks), address (-localOnly, -ipWhitelist), over_budget (connection caps).", []string{"cause"}, nil)
	descDirEpoch    = prometheus.NewDesc("fenceline_fleet_directory_epoch", "In a fleet: the epoch of the group directory this node routes by (0 until it has one).", nil, nil)
	descCtlApplied  = prometheus.NewDesc("fenceline_fleet_control_applied_index", "In a fleet: the raft applied index of this node's control group replica.", nil, nil)
	descImposters   = prometheus.NewDesc("fenceline_imposters", "Imposters in the cluster's configuration, by whether this node serves them or cannot bind their port.", []string{"state"}, nil)
)

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descScrapeOK, descTerm, descCommit, descApplied, descIsLeader, descIsolated, descIsolatedSec, descTerms, descMIdx,
		descPermits, descShed, descServed, descFsyncs, descBatches, descPuts, descLive, descEnvDropped, descTCPRejected, descFrames, descImposters, descRefused, descDirEpoch, descCtlApplied} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	g := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	ct := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var ms []prometheus.Metric
	err := c.nd.Do(ctx, func(n *node.Node) {
		// Built on the loop, sent after: the channel may block on a slow
		// scraper, and the loop must not.
		mk := func(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
			ms = append(ms, prometheus.MustNewConstMetric(d, t, v, labels...))
		}
		info := n.Consensus.Info()
		mk(descTerm, prometheus.GaugeValue, float64(info.Term))
		mk(descCommit, prometheus.GaugeValue, float64(info.Commit))
		mk(descApplied, prometheus.GaugeValue, float64(info.Applied))
		mk(descIsLeader, prometheus.GaugeValue, b(n.Consensus.IsLeader()))
		mk(descIsolated, prometheus.GaugeValue, b(n.Consensus.IsIsolated()))
		mk(descIsolatedSec, prometheus.CounterValue, c.nd.Isolated().Seconds())
		mk(descTerms, prometheus.CounterValue, float64(n.Consensus.Terms))
		mk(descMIdx, prometheus.GaugeValue, float64(n.Consensus.Membership().Index))
		mk(descPermits, prometheus.GaugeValue, float64(n.Flow.PermitsInUse()))
		mk(descShed, prometheus.CounterValue, float64(n.Flow.Shed))
		mk(descServed, prometheus.CounterValue, float64(n.Flow.Served))
		st, live := n.Flow.Shard()
		mk(descFsyncs, prometheus.CounterValue, float64(st.Fsyncs))
		mk(descBatches, prometheus.CounterValue, float64(st.Batches))
		mk(descPuts, prometheus.CounterValue, float64(st.Puts))
		mk(descLive, prometheus.GaugeValue, float64(live))
		if _, inFleet := n.FleetGroup(); inFleet {
			epoch := uint64(0)
			if d := n.Directory(); d != nil {
				epoch = d.Epoch()
			}
			mk(descDirEpoch, prometheus.GaugeValue, float64(epoch))
			mk(descCtlApplied, prometheus.GaugeValue, float64(n.Control.Info().Applied))
		}
		if n.Link != nil {
			for i, v := range n.Link.Stats().Dropped {
				mk(descEnvDropped, prometheus.CounterValue, float64(v), transport.CauseNames[i])
			}
		}
	})
	g(descScrapeOK, b(err == nil))
	for _, m := range ms {
		ch <- m
	}
	t := c.nd.TCPStats()
	for cause, v := range map[string]uint64{"over_cap": t.RefusedOverCap, "per_source": t.RefusedPerSource, "evicted_pending": t.EvictedPending,
		"replayed": t.Replayed, "handshake_failed": t.HandshakeFailed, "auth_failed": t.AuthFailed, "auth_timeout": t.AuthTimedOut,
		"oversize": t.Oversize, "queue_full": t.QueueFull, "backoff": t.InBackoff, "unknown_peer": t.UnknownPeer,
		"misaddressed": t.Misaddressed, "mailbox_full": t.DeliverRefused} {
		ct(descTCPRejected, v, cause)
	}
	if g := c.a.guard; g != nil {
		ct(descRefused, g.unauthorized.Load(), "unauthorized")
		ct(descRefused, g.badHost.Load(), "host")
		ct(descRefused, g.badOrigin.Load(), "origin")
		if g.access.Blocked != nil {
			ct(descRefused, g.access.Blocked.Load(), "address")
		}
	}
	if c.a.conns != nil {
		ct(descRefused, c.a.conns.overBudget.Load(), "over_budget")
	}
	if c.a.imposters != nil {
		serving, unbound := c.a.imposters.Stats()
		g(descImposters, float64(serving), "serving")
		g(descImposters, float64(unbound), "unbound")
	}
	ct(descFrames, t.FramesIn, "in")
	ct(descFrames, t.FramesOut, "out")
}
