package flow

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/fenceline/fenceline/core/shard"
	"github.com/fenceline/fenceline/dial"
)

// Small alphabets, so that draws collide: maps get several keys, and
// equal and empty strings come up often.
var (
	frameStrings = rapid.SampledFrom([]string{"", "a", "b", "i8080:x", "t1:é", "\x00", "zz"})
	frameBlobs   = rapid.Custom(func(t *rapid.T) []byte {
		// An empty byte string decodes as nil: draw nil, never []byte{}.
		if b := rapid.SliceOfN(rapid.Byte(), 0, 6).Draw(t, "blob"); len(b) > 0 {
			return b
		}
		return nil
	})
	frameUint = rapid.OneOf(rapid.Uint64Range(0, 300), rapid.Uint64())
	frameInt  = rapid.OneOf(rapid.Int64Range(-300, 300), rapid.Int64())
)

func drawBlobs(t *rapid.T, label string) map[string][]byte {
	m := rapid.MapOfN(frameStrings, frameBlobs, 0, 3).Draw(t, label)
	if len(m) == 0 {
		return nil
	}
	return m
}

func drawValue(t *rapid.T) Value {
	v := Value{
		Tomb:        rapid.Bool().Draw(t, "tomb"),
		Data:        frameBlobs.Draw(t, "data"),
		Tuple:       Tuple{Era: rapid.SampledFrom([]uint64{0, 0, 1, 1 << 40}).Draw(t, "era"), MIdx: frameUint.Draw(t, "midx"), V: frameUint.Draw(t, "v"), Origin: dial.NodeID(frameUint.Draw(t, "origin"))},
		ExpiresAtMs: frameInt.Draw(t, "exp"),
	}
	return v
}

func drawEntries(t *rapid.T, label string) map[string]Value {
	m := rapid.MapOfN(frameStrings, rapid.Custom(drawValue), 0, 3).Draw(t, label)
	if len(m) == 0 {
		return nil
	}
	return m
}

func drawMsg(t *rapid.T) msg {
	m := msg{
		Kind:    rapid.SampledFrom(kindCodes[1:]).Draw(t, "kind"),
		ID:      frameUint.Draw(t, "id"),
		M:       frameUint.Draw(t, "m"),
		Flow:    frameStrings.Draw(t, "flow"),
		Err:     frameStrings.Draw(t, "err"),
		Session: frameUint.Draw(t, "session"),
		Served:  frameUint.Draw(t, "served"),
		Their:   frameUint.Draw(t, "their"),
		Mode:    shard.Mode(rapid.Byte().Draw(t, "mode")),
		Entries: drawEntries(t, "entries"),
	}
	if rapid.Bool().Draw(t, "has req") {
		m.Req = &Request{
			Flow: frameStrings.Draw(t, "req flow"), Op: Op(rapid.Byte().Draw(t, "op")), Key: frameStrings.Draw(t, "key"),
			Value: frameBlobs.Draw(t, "value"), Expect: frameBlobs.Draw(t, "expect"), ExpectAbsent: rapid.Bool().Draw(t, "absent"),
			Delta: frameInt.Draw(t, "delta"), Entries: drawBlobs(t, "req entries"), TTLMs: frameInt.Draw(t, "ttl"),
			Read: ReadMode(rapid.Byte().Draw(t, "read")), Mode: shard.Mode(rapid.Byte().Draw(t, "req mode")),
		}
	}
	if rapid.Bool().Draw(t, "has resp") {
		m.Resp = &Response{
			Found: rapid.Bool().Draw(t, "found"), Value: frameBlobs.Draw(t, "resp value"),
			Succeeded: rapid.Bool().Draw(t, "ok"), Int: frameInt.Draw(t, "int"), All: drawBlobs(t, "all"),
		}
	}
	if n := rapid.IntRange(0, 3).Draw(t, "flows"); n > 0 {
		m.Flows = map[string]map[string]Value{}
		for range n {
			m.Flows[frameStrings.Draw(t, "flows flow")] = drawEntries(t, "flow entries")
		}
	}
	if d := rapid.MapOfN(rapid.Uint32(), frameUint, 0, 4).Draw(t, "digests"); len(d) > 0 {
		m.Digests = d
	}
	if md := rapid.MapOfN(frameStrings, rapid.Byte(), 0, 3).Draw(t, "modes"); len(md) > 0 {
		m.Modes = map[string]shard.Mode{}
		for f, b := range md { //fenceline:unordered building a map
			m.Modes[f] = shard.Mode(b)
		}
	}
	if m.Kind == FrameGroupOp {
		m.Epoch = frameUint.Draw(t, "epoch")
	}
	return m
}

// Every field of every frame survives the wire, and one frame has one
// encoding: encoding what was decoded gives the same bytes.
func TestFrameRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := drawMsg(t)
		b := encodeFrame(m)
		got, err := decodeFrame(b)
		require.NoError(t, err)
		require.Equal(t, m, got)
		require.Equal(t, b, encodeFrame(got))
		head, err := scanFrame(b)
		require.NoError(t, err)
		require.Equal(t, msg{Kind: m.Kind, ID: m.ID, M: m.M, Flow: m.Flow, Session: m.Session, Served: m.Served, Their: m.Their, Mode: m.Mode, Err: m.Err, Epoch: m.Epoch}, head)
		info, err := DecodeFrame(b)
		require.NoError(t, err)
		want := FrameInfo{Kind: m.Kind, Flow: m.Flow, M: m.M, Served: m.Served, Session: m.Session, ID: m.ID, Epoch: m.Epoch, Refusal: m.Err}
		if m.Kind == FrameAEResp {
			want.Flows = len(m.Flows)
		}
		if m.Kind == FramePush {
			entries, err := PushEntries(b)
			require.NoError(t, err)
			require.Equal(t, m.Entries, entries)
		}
		require.Equal(t, want, info)
		kind, ok := PeekKind(b)
		require.True(t, ok)
		require.Equal(t, m.Kind, kind)
		family, reply, ok := FrameKind(b)
		require.True(t, ok)
		wantFamily, wantReply := map[string]uint8{FrameOp: FamilyOp, FrameGroupOp: FamilyOp, FrameOpResp: FamilyOp, FrameAE: FamilyAE, FrameAEResp: FamilyAE,
			FrameAdopt: FamilyAdopt, FrameAdoptResp: FamilyAdopt, FrameMoveAsk: FamilyMove, FrameMoveCopy: FamilyMove, FrameIngest: FamilyMove, FrameIngestAck: FamilyMove}[m.Kind],
			m.Kind == FrameOpResp || m.Kind == FrameAEResp || m.Kind == FrameAdoptResp || m.Kind == FrameMoveCopy || m.Kind == FrameIngestAck
		require.Equal(t, wantFamily, family)
		require.Equal(t, wantReply, reply)
		// Every strict prefix is refused.
		cut := rapid.IntRange(0, len(b)-1).Draw(t, "cut")
		_, err = decodeFrame(b[:cut])
		require.ErrorIs(t, err, errFrame)
	})
}

// The same frame built from maps filled in different orders is the same
// bytes: no map order reaches the wire.
func TestFrameBytesDoNotDependOnMapOrder(t *testing.T) {
	v := Value{Data: []byte("1"), Tuple: Tuple{MIdx: 1, V: 2, Origin: 3}}
	keys := []string{"d", "a", "c", "b", "e", "f", "g"}
	var first []byte
	for i := range 20 {
		e := map[string]Value{}
		for j := range keys {
			e[keys[(i+j)%len(keys)]] = v
		}
		b := encodeFrame(msg{Kind: FramePush, Flow: "f", Entries: e, Flows: map[string]map[string]Value{"x": e, "y": e}})
		if first == nil {
			first = b
		}
		require.Equal(t, first, b)
	}
}

// What the decoder refuses, each for its own reason.
func TestFrameDecoderIsStrict(t *testing.T) {
	good := encodeFrame(msg{Kind: FramePush, Flow: "f", Entries: map[string]Value{"a": {Data: []byte("x")}, "b": {}}})
	_, err := decodeFrame(good)
	require.NoError(t, err)
	// The entries sit at the end, before three empty maps: count, "a", value, "b", value.
	for name, b := range map[string][]byte{
		"empty":          nil,
		"raft prefix":    {1, frameVersion, 1},
		"version":        append([]byte{FramePrefix, 2}, good[2:]...),
		"trailing byte":  append(bytes.Clone(good), 0),
		"non-minimal id": append([]byte{FramePrefix, frameVersion, 3, 0x80, 0x00}, good[4:]...),
		"huge count":     {FramePrefix, frameVersion, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"huge length":    {FramePrefix, frameVersion, 1, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"bool 2":         {FramePrefix, frameVersion, 1, 0, 0, 0, 0, 0, 0, 0, 0, 2},
	} {
		_, err := decodeFrame(b)
		require.ErrorIs(t, err, errFrame, name)
	}
	// Keys out of order or repeated: swap the two entries' keys.
	swapped := bytes.Replace(bytes.Replace(good, []byte{1, 'a'}, []byte{1, '#'}, 1), []byte{1, 'b'}, []byte{1, 'a'}, 1)
	swapped = bytes.Replace(swapped, []byte{1, '#'}, []byte{1, 'b'}, 1)
	_, err = decodeFrame(swapped)
	require.ErrorIs(t, err, errFrame)
	repeated := bytes.Replace(good, []byte{1, 'b'}, []byte{1, 'a'}, 1)
	_, err = decodeFrame(repeated)
	require.ErrorIs(t, err, errFrame)
	// An answer's flags byte with a bit no flag names: found where the
	// encodings of no flags and of both differ.
	none := encodeFrame(msg{Kind: FrameOpResp, ID: 1, Session: 1, Resp: &Response{}})
	both := encodeFrame(msg{Kind: FrameOpResp, ID: 1, Session: 1, Resp: &Response{Found: true, Succeeded: true}})
	require.Len(t, both, len(none))
	at := -1
	for i := range none {
		if none[i] != both[i] {
			at = i
			break
		}
	}
	require.GreaterOrEqual(t, at, 0)
	unknown := bytes.Clone(none)
	unknown[at] = 4
	_, err = decodeFrame(unknown)
	require.ErrorIs(t, err, errFrame, "a flag bit no flag names")
	_, err = scanFrame(unknown)
	require.Error(t, err, "the scan refuses it too")
}

// FuzzFrame: decoding any bytes never panics and allocates within the
// frame's bounds; what decodes encodes back to the same bytes and decodes
// again to the same frame; and a store handed it does not panic.
func FuzzFrame(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{FramePrefix, frameVersion, 1})
	for i := range 32 {
		f.Add(encodeFrame(rapid.Custom(drawMsg).Example(i)))
	}
	f.Add(encodeFrame(msg{Kind: FrameOp, ID: 7, Session: 1, M: 1, Req: &Request{Flow: "i1:f", Op: OpIncr, Key: "n", Delta: 1}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := decodeFrame(data)
		_, scanErr := scanFrame(data)
		require.Equal(t, err == nil, scanErr == nil, "scanFrame refuses exactly what decodeFrame refuses")
		if err != nil {
			require.True(t, errors.Is(err, errFrame))
			_, err := DecodeFrame(data)
			require.Error(t, err)
		} else {
			enc := encodeFrame(m)
			require.True(t, bytes.Equal(data, enc), "decoded %x, encodes as %x", data, enc)
			again, err := decodeFrame(enc)
			require.NoError(t, err)
			require.Equal(t, m, again)
		}
		s, _, _, _ := newTestStore(t, idA, Config{})
		bad := s.BadFrames
		s.HandleFrame(idB, data)
		if err != nil {
			require.Equal(t, bad+1, s.BadFrames, "a frame that does not decode is counted")
		}
	})
}

// BenchmarkFrame encodes and decodes the frames of one forwarded write:
// the request, the owner's answer and a push of the written key.
func BenchmarkFrame(b *testing.B) {
	v := Value{Data: []byte("17"), Tuple: Tuple{MIdx: 3, V: 1<<32 + 9, Origin: idA}, ExpiresAtMs: 1_767_225_600_000}
	frames := []msg{
		{Kind: FrameOp, ID: 812, Session: 1<<62 + 5, M: 3, Req: &Request{Flow: "i4545:hot-1", Op: OpIncr, Key: "n", Delta: 1}},
		{Kind: FrameOpResp, ID: 812, Session: 1<<62 + 5, Resp: &Response{Found: true, Int: 17}},
		{Kind: FramePush, M: 3, Flow: "i4545:hot-1", Entries: map[string]Value{"n": v}},
	}
	for b.Loop() {
		for _, m := range frames {
			if _, err := decodeFrame(encodeFrame(m)); err != nil {
				b.Fatal(err)
			}
		}
	}
}
