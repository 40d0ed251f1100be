package kv

import "fmt"

// EventKind says what happened to a key or lease.
type EventKind uint8

const (
	eventInvalid EventKind = iota
	// EventPut: a key was written, or a lease granted or renewed.
	EventPut
	// EventDeleted: a key was deleted, or a lease released by its holder.
	EventDeleted
	// EventExpired: a lease lapsed because its holder stopped renewing.
	// Kept apart from EventDeleted on purpose: "the scheduler let go" and
	// "the scheduler went silent" call for different reactions.
	EventExpired
)

func (k EventKind) String() string {
	switch k {
	case EventPut:
		return "put"
	case EventDeleted:
		return "deleted"
	case EventExpired:
		return "expired"
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Space says whether an event is about a data key or a lease; the two
// namespaces are separate, so a key and a lease may share a name.
type Space uint8

const (
	spaceInvalid Space = iota
	SpaceData
	SpaceLease
)

func (s Space) String() string {
	switch s {
	case SpaceData:
		return "data"
	case SpaceLease:
		return "lease"
	}
	return fmt.Sprintf("Space(%d)", uint8(s))
}

// Event is one applied change. Every change makes exactly one event, so
// Version is unique across events and the events of a state carry
// consecutive versions. Every replica emits the same events, followers
// included, so watchers can watch a nearby member rather than the leader.
type Event struct {
	Kind  EventKind
	Space Space
	// Key is the data key or the lease name.
	Key string
	// Version is the change's version.
	Version uint64
	// Value is the value written, for a data Put. Shared with the state:
	// callers must not modify it.
	Value []byte
	// Holder, Token and DeadlineMs describe the lease, for lease events:
	// as granted for Put, as it was for Deleted and Expired.
	Holder     string
	Token      uint64
	DeadlineMs int64
	// Index is the raft index of the entry that made the change.
	Index uint64
	// AtMs is the applied time the change happened at.
	AtMs int64
}

// size is what the event costs against Config.EventLogBytes.
func (ev *Event) size() int {
	return eventOverheadBytes + len(ev.Key) + len(ev.Value) + len(ev.Holder)
}

// EventsSince returns the events with Version > version, oldest first, at
// most max of them (all, if max <= 0). A watcher passes the version of the
// last event it handled, or the Revision of a read it started from. If the
// log no longer reaches back that far it returns ErrCompacted, and the
// watcher must read the state afresh. A version past the newest event
// returns nothing: the watcher is ahead of this replica and should wait.
func (s *State) EventsSince(version uint64, max int) ([]Event, error) {
	return s.log.since(version, max)
}

// emit records one change made by the entry being applied.
func (s *State) emit(ev Event) {
	ev.Index = s.appliedIndex
	ev.AtMs = s.appliedMs
	s.log.add(ev, s.cfg.EventLogLen, s.cfg.EventLogBytes)
}

// eventLog keeps the newest events, bounded by count and bytes.
type eventLog struct {
	// events holds versions floor+1 .. last, consecutive, oldest first.
	// Dropping reslices from the front; append's reallocation reclaims the
	// dropped prefix, so memory stays within about twice the bound.
	events []Event
	// floor is the version up to which events were dropped: every event
	// with Version > floor is kept.
	floor uint64
	// last is the newest event's version (floor when there is none).
	last  uint64
	bytes int
}

func (l *eventLog) add(ev Event, maxLen, maxBytes int) {
	if ev.Version != l.last+1 {
		panic(fmt.Sprintf("kv: event version %d does not follow %d", ev.Version, l.last))
	}
	l.events = append(l.events, ev)
	l.last = ev.Version
	l.bytes += ev.size()
	// Config.check guarantees one event fits, so the newest is never
	// dropped here.
	for len(l.events) > maxLen || l.bytes > maxBytes {
		l.bytes -= l.events[0].size()
		l.floor = l.events[0].Version
		l.events[0] = Event{} // let the dropped value be collected
		l.events = l.events[1:]
	}
}

func (l *eventLog) since(version uint64, max int) ([]Event, error) {
	if version < l.floor {
		return nil, fmt.Errorf("%w: asked for events after version %d, log starts after %d", ErrCompacted, version, l.floor)
	}
	if version >= l.last {
		return nil, nil
	}
	// Versions are consecutive, so the position is arithmetic.
	out := l.events[version-l.floor:]
	if max > 0 && len(out) > max {
		out = out[:max]
	}
	return append([]Event(nil), out...), nil
}

// restart empties the log at version: after a restore the history before
// it is gone, and watchers from before must resynchronise.
func (l *eventLog) restart(version uint64) {
	*l = eventLog{floor: version, last: version}
}

func (l *eventLog) check(version uint64) error {
	if l.last != version {
		return fmt.Errorf("newest event has version %d, state has %d", l.last, version)
	}
	if uint64(len(l.events)) != l.last-l.floor {
		return fmt.Errorf("event log holds %d events for versions (%d, %d]", len(l.events), l.floor, l.last)
	}
	bytes := 0
	for i := range l.events {
		if want := l.floor + 1 + uint64(i); l.events[i].Version != want {
			return fmt.Errorf("event %d has version %d, want %d", i, l.events[i].Version, want)
		}
		bytes += l.events[i].size()
	}
	if bytes != l.bytes {
		return fmt.Errorf("event log counts %d bytes, holds %d", l.bytes, bytes)
	}
	return nil
}
