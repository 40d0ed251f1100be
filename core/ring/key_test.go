package ring

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestScopedKeys(t *testing.T) {
	require.Equal(t, "i8080:alice", ImposterKey(8080, "alice"))
	require.Equal(t, "i0:", ImposterKey(0, ""))
	require.Equal(t, "i65535:a:b", ImposterKey(65535, "a:b"))
	require.Equal(t, "tacme:alice", TenantKey("acme", "alice"))
	require.Equal(t, "f:alice", FleetKey("alice"))
	require.Equal(t, "s8080:stub-1", SequenceKey(8080, "stub-1"))
	require.Equal(t, ClassSequence, ClassOf(SequenceKey(8080, "stub-1")))
	for _, k := range []string{ImposterKey(8080, "s"), TenantKey("s", "a"), FleetKey("s"), ""} {
		require.Equalf(t, ClassFlow, ClassOf(k), "%q", k)
	}

	// The default scope keeps two imposters that see the same flow id apart.
	require.NotEqual(t, ImposterKey(8080, "alice"), ImposterKey(8081, "alice"))
}

func TestTenantNamesMustNotBlurTheSeparator(t *testing.T) {
	// Without the check, tenant "a:b" with flow "c" and tenant "a" with flow
	// "b:c" would both be "ta:b:c": two tenants sharing one flow's state.
	require.Equal(t, "t"+"a"+":"+"b:c", "t"+"a:b"+":"+"c")

	require.NoError(t, ValidateTenant("acme"))
	for _, bad := range []string{"", "a:b", ":"} {
		err := ValidateTenant(bad)
		require.ErrorIsf(t, err, ErrBadTenant, "%q", bad)
		require.Panicsf(t, func() { TenantKey(bad, "c") }, "%q", bad)
	}
	require.ErrorContains(t, ValidateTenant("a:b"), `"a:b"`)
}
