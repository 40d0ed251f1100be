//fenceline:nomutate a test double: the tests of shard and flow run on it; no node does (nodes write through Log)

package shard

import "sort"

// Memory is a Backend in memory: what a crash keeps is whatever was
// written, synced or not. Tests use it to count the writer's work, and a
// node without a data dir could run on it.
type Memory struct {
	data   map[string]map[string][]byte
	Writes int // Write calls
	Syncs  int // Write calls with sync, plus Sync calls
	closed bool
}

var _ Backend = (*Memory)(nil)

// NewMemory returns an empty memory backend.
func NewMemory() *Memory { return &Memory{data: map[string]map[string][]byte{}} }

// Write applies a batch.
func (m *Memory) Write(batch []Mutation, sync bool) error {
	if m.closed {
		return ErrClosed
	}
	m.Writes++
	if sync {
		m.Syncs++
	}
	for _, mu := range batch {
		f := m.data[mu.Flow]
		if mu.Value == nil {
			delete(f, mu.Key)
			if len(f) == 0 {
				delete(m.data, mu.Flow)
			}
			continue
		}
		if f == nil {
			f = map[string][]byte{}
			m.data[mu.Flow] = f
		}
		f[mu.Key] = append([]byte{}, mu.Value...)
	}
	return nil
}

// Sync counts a sync.
func (m *Memory) Sync() error {
	if m.closed {
		return ErrClosed
	}
	m.Syncs++
	return nil
}

// Scan visits every key in (Flow, Key) order.
func (m *Memory) Scan(fn func(Mutation) error) error {
	flows := make([]string, 0, len(m.data))
	for f := range m.data {
		flows = append(flows, f)
	}
	sort.Strings(flows)
	for _, f := range flows {
		keys := make([]string, 0, len(m.data[f]))
		for k := range m.data[f] {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if err := fn(Mutation{Flow: f, Key: k, Value: append([]byte{}, m.data[f][k]...)}); err != nil {
				return err
			}
		}
	}
	return nil
}

// Close marks the backend closed; a reopen is a new Shard on the same
// Memory after Reopen.
func (m *Memory) Close() error { m.closed = true; return nil }

// Reopen makes a closed memory backend usable again, as reopening a file
// would.
func (m *Memory) Reopen() { m.closed = false }
