package kv

import "bytes"

// put stores value, which the state now owns, at key and returns the
// change's version.
func (s *State) put(key string, value []byte) uint64 {
	e := Entry{Value: value, Version: s.bump()}
	s.data[key] = e
	s.emit(Event{Kind: EventPut, Space: SpaceData, Key: key, Version: e.Version, Value: value})
	return e.Version
}

// cloneValues returns op with copies of the values a Put would store, so
// the caller's buffers stay out of the replicated state. Empty values
// become nil: one value, one representation, as DecodeCommand gives.
func (op Op) cloneValues() Op {
	switch op.Kind {
	case OpPut:
		op.Value = cloneBytes(op.Value)
	case OpTxn:
		for _, branch := range []*[]Op{&op.OnSuccess, &op.OnFailure} {
			if len(*branch) == 0 {
				continue
			}
			ops := make([]Op, len(*branch))
			for i, sub := range *branch {
				ops[i] = sub.cloneValues()
			}
			*branch = ops
		}
	}
	return op
}

func cloneBytes(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return bytes.Clone(b)
}

// delete removes key. Deleting an absent key is not a change: no version,
// no event.
func (s *State) delete(key string) (version uint64, found bool) {
	if _, ok := s.data[key]; !ok {
		return 0, false
	}
	delete(s.data, key)
	v := s.bump()
	s.emit(Event{Kind: EventDeleted, Space: SpaceData, Key: key, Version: v})
	return v, true
}

// txn checks every guard against the state as it was before the txn, then
// runs one branch. Validation already passed, so no op can fail halfway.
func (s *State) txn(op Op) (succeeded bool, version uint64) {
	succeeded = true
	for _, g := range op.Guards {
		if !s.holds(g) {
			succeeded = false
			break
		}
	}
	branch := op.OnFailure
	if succeeded {
		branch = op.OnSuccess
	}
	for _, sub := range branch {
		var v uint64
		switch sub.Kind {
		case OpPut:
			v = s.put(sub.Key, sub.Value)
		case OpDelete:
			v, _ = s.delete(sub.Key)
		}
		if v != 0 {
			version = v
		}
	}
	return succeeded, version
}

// holds evaluates one guard.
func (s *State) holds(g Guard) bool {
	e, ok := s.data[g.Key]
	switch g.Kind {
	case GuardAbsent:
		return !ok
	case GuardValueIs:
		return ok && bytes.Equal(e.Value, g.Value)
	case GuardVersionIs:
		if g.Version == 0 {
			return !ok
		}
		if s.cfg.Bugs.ValueGuard {
			// Planted bug "value-guard": the version the client read is
			// ignored, so a key that went A -> B -> A passes.
			return ok && bytes.Equal(e.Value, g.Value)
		}
		// Versions are never reused, so an equal version means no write
		// happened since the client's read, whatever the value now is.
		return ok && e.Version == g.Version
	}
	return false
}
