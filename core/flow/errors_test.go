package flow

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fenceline/fenceline/core/fleet"
)

// An owner's refusal crosses the wire as a code, and the caller gets what
// a refusal made on its own node would be: the caller's mistakes (a bad
// request, an increment of a non-integer) as themselves, so the HTTP
// layer answers 400 with their own text; every other refusal wrapped in
// ErrUnavailable, known not applied as on the owner (a failed disk is an
// unknown outcome: the write was applied in memory); and a code no
// version defines as an unknown outcome.
func TestRefusalsCrossTheWire(t *testing.T) {
	require.NoError(t, decodeErr(encodeErr(nil)))
	for _, c := range errCodes {
		got := decodeErr(encodeErr(c.err))
		require.ErrorIs(t, got, c.err, c.code)
		require.Equal(t, Known(c.err), Known(got), "%s: known not applied on the caller exactly when on the owner", c.code)
		if c.err == ErrNotInteger || c.err == ErrBadRequest {
			require.Equal(t, c.err, got, "%s is the caller's mistake, not the backend's", c.code)
			require.NotErrorIs(t, got, ErrUnavailable, c.code)
			continue
		}
		require.ErrorIs(t, got, ErrUnavailable, c.code)
	}
	odd := decodeErr(encodeErr(errors.New("disk on fire")))
	require.ErrorIs(t, odd, ErrUnavailable)
	require.False(t, Known(odd), "an error the owner hit after it may have applied is an unknown outcome")
}

// Reason names each refusal by its own word, wrapped or forwarded, and
// everything else "timeout": the outcome is unknown.
func TestReasonNamesEachRefusal(t *testing.T) {
	for err, want := range map[error]string{
		ErrShed: "shed", ErrBusy: "shed", ErrNoOwner: "no_owner", ErrFenced: "fenced",
		ErrNotOwner: "not_owner", ErrIsolated: "isolated", ErrNotAdopted: "not_adopted",
		ErrSend: "unreachable", ErrBadRequest: "bad_request", ErrNotInteger: "bad_request",
		fleet.ErrElsewhere: "partition_elsewhere", fleet.ErrStaleEpoch: "stale_epoch",
		fleet.ErrAhead: "epoch_ahead", fleet.ErrMoving: "partition_moving",
		ErrTimeout: "timeout", ErrCrashed: "timeout", ErrDisk: "timeout", ErrDiskSlow: "timeout",
	} {
		require.Equal(t, want, Reason(err), "%v", err)
		require.Equal(t, want, Reason(unavailable(err)), "%v, wrapped", err)
		require.Equal(t, want, Reason(fmt.Errorf("forwarded: %w", err)), "%v, wrapped again", err)
	}
	require.Equal(t, "timeout", Reason(errors.New("something else")))
}
