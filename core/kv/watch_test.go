package kv_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/core/kv"
)

func TestEventsSinceAtLogLimit(t *testing.T) {
	r := newReplica(t, kv.Config{EventLogLen: 4})
	for i := range 10 {
		r.apply(int64(i), put(fmt.Sprintf("k%d", i), "v"))
	}
	// Versions 7..10 are kept; a watcher that saw 6 is exactly in reach.
	evs, err := r.s.EventsSince(6, 0)
	require.NoError(t, err)
	require.Len(t, evs, 4)
	require.Equal(t, uint64(7), evs[0].Version)
	require.Equal(t, "k9", evs[3].Key)
	require.Equal(t, "v", string(evs[3].Value))

	for _, v := range []uint64{0, 5} {
		_, err = r.s.EventsSince(v, 0)
		require.ErrorIs(t, err, kv.ErrCompacted, "events after %d were dropped", v)
	}

	evs, err = r.s.EventsSince(7, 2)
	require.NoError(t, err)
	require.Equal(t, []uint64{8, 9}, versions(evs), "max bounds the answer")

	evs, err = r.s.EventsSince(10, 0)
	require.NoError(t, err)
	require.Empty(t, evs, "nothing newer yet")
	evs, err = r.s.EventsSince(99, 0)
	require.NoError(t, err)
	require.Empty(t, evs, "a watcher ahead of this replica waits")
}

func TestEventLogBytesBound(t *testing.T) {
	// The smallest log the bounds allow holds one maximal event.
	cfg := kv.Config{MaxKeyBytes: 8, MaxValueBytes: 1000, EventLogBytes: 2*8 + 1000 + 96}
	r := newReplica(t, cfg)
	r.apply(0, put("a", strings.Repeat("x", 1000)))
	r.apply(0, put("b", "small"))
	_, err := r.s.EventsSince(0, 0)
	require.ErrorIs(t, err, kv.ErrCompacted, "the big event was dropped to make room")
	require.Equal(t, []uint64{2}, versions(r.eventsAfter(1)))

	_, err = kv.New(kv.Config{MaxKeyBytes: 8, MaxValueBytes: 1000, EventLogBytes: 1000})
	require.Error(t, err, "a log that cannot hold one maximal event is refused")
}

func TestEventsSinceReturnsACopy(t *testing.T) {
	r := newReplica(t, kv.Config{})
	r.apply(0, put("a", "1"))
	evs := r.eventsAfter(0)
	evs[0].Key = "mangled"
	require.Equal(t, "a", r.eventsAfter(0)[0].Key)
}

func TestEventsAfterRestoreStartAtSnapshot(t *testing.T) {
	r := newReplica(t, kv.Config{})
	r.apply(0, put("a", "1"))
	r.apply(0, put("b", "2"))

	fresh := newReplica(t, kv.Config{})
	require.NoError(t, fresh.s.Restore(r.s.Snapshot()))
	fresh.index = r.index
	_, err := fresh.s.EventsSince(1, 0)
	require.ErrorIs(t, err, kv.ErrCompacted, "history before the snapshot is gone")
	require.Empty(t, fresh.eventsAfter(2))
	fresh.apply(0, kv.Delete("a"))
	evs := fresh.eventsAfter(2)
	require.Len(t, evs, 1)
	require.Equal(t, kv.Event{Kind: kv.EventDeleted, Space: kv.SpaceData, Key: "a", Version: 3, Index: 3}, evs[0])
}

func versions(evs []kv.Event) []uint64 {
	out := make([]uint64, len(evs))
	for i, ev := range evs {
		out[i] = ev.Version
	}
	return out
}
