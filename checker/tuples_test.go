package checker

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/core/flow"
	"github.com/fenceline/fenceline/dial"
)

// One tuple may be pushed any number of times, by any node, with the
// same value; with another value or tombstone it is two writes under one
// tuple, a fork: reported once per flow.
func TestTuplesNameOneWrite(t *testing.T) {
	name := func(id dial.NodeID) string { return fmt.Sprintf("n%d", id) }
	t1 := flow.Tuple{MIdx: 1, V: 1<<32 + 1, Origin: 1}
	t2 := flow.Tuple{MIdx: 1, V: 1<<32 + 2, Origin: 1}
	var c Tuples
	rec := &Record{}
	c.Push(rec, 1, 1, "f", map[string]flow.Value{"a": {Data: []byte("x"), Tuple: t1}, "b": {Data: []byte("y"), Tuple: t1}}, name)
	c.Push(rec, 1, 2, "f", map[string]flow.Value{"a": {Data: []byte("x"), Tuple: t1}}, name)
	c.Push(rec, 2, 3, "f", map[string]flow.Value{"a": {Data: []byte("z"), Tuple: t2}}, name)
	c.Push(rec, 3, 4, "g", map[string]flow.Value{"a": {Data: []byte("q"), Tuple: t1}}, name)
	require.True(t, rec.OK(), "the same write pushed again, another tuple, another key or flow: all one write each")
	require.Equal(t, 4, c.Writes())

	c.Push(rec, 1, 5, "f", map[string]flow.Value{"a": {Data: []byte("other"), Tuple: t1}}, name)
	require.Len(t, rec.Failures, 1)
	require.Contains(t, rec.Failures[0], "tuple-unique: n1 pushed f key a")
	c.Push(rec, 1, 6, "f", map[string]flow.Value{"b": {Tomb: true, Data: []byte("y"), Tuple: t1}}, name)
	require.Len(t, rec.Failures, 1, "once per flow")
	c.Push(rec, 3, 7, "g", map[string]flow.Value{"a": {Tomb: true, Data: []byte("q"), Tuple: t1}}, name)
	require.Len(t, rec.Failures, 2, "a tombstone under a live value's tuple is another write")
}
