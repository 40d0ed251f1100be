package ring

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// A flow's key on the ring is its flow id scoped by a namespace prefix, so
// that two imposters which see the same flow id (say, the same X-Flow-Id
// header value) do not share state unless they opt into it:
//
//	i<port>:<id>    imposter scope, the default
//	t<tenant>:<id>  tenant scope
//	f:<id>          fleet scope, one namespace for every imposter
//	s<port>:<stub>  a stub's response cycle, shared by the cluster
//	                (placed under ClassSequence, the others ClassFlow)
//
// The scoped key is what Ring.Owner hashes, so one owner holds every entry of
// a flow. The leading letters differ and the port is plain decimal, so no two
// scopes can produce the same key; a tenant name must not contain ':' for
// the same reason (see ValidateTenant).

// ImposterKey scopes flow id to the imposter listening on port: i<port>:<id>.
func ImposterKey(port uint16, id string) string {
	return "i" + strconv.FormatUint(uint64(port), 10) + ":" + id
}

// SequenceKey names the response cycle of the stub called stub (an id
// the stub keeps across edits) of the imposter on port: s<port>:<stub>.
func SequenceKey(port uint16, stub string) string {
	return "s" + strconv.FormatUint(uint64(port), 10) + ":" + stub
}

// ClassOf is the ring class a key of the flow store is placed under: a
// response cycle's under ClassSequence, every flow scope under ClassFlow.
func ClassOf(key string) Class {
	if len(key) > 0 && key[0] == 's' {
		return ClassSequence
	}
	return ClassFlow
}

// FleetKey puts flow id in the fleet-wide namespace: f:<id>.
func FleetKey(id string) string { return "f:" + id }

// TenantKey scopes flow id to a tenant: t<tenant>:<id>. The tenant name must
// have passed ValidateTenant when the configuration was loaded; TenantKey
// panics on one that would not, because such a name makes two different
// (tenant, id) pairs share a key ("a:b"+"c" and "a"+"b:c"), and by the time a
// request builds a key that is a bug, not bad input.
func TenantKey(tenant, id string) string {
	if err := ValidateTenant(tenant); err != nil {
		panic(err)
	}
	return "t" + tenant + ":" + id
}

// ErrBadTenant is wrapped by ValidateTenant's errors.
var ErrBadTenant = errors.New("ring: bad tenant name")

// ValidateTenant checks that tenant can scope flow keys: non-empty and free
// of ':', the separator between tenant and flow id.
func ValidateTenant(tenant string) error {
	if tenant == "" {
		return fmt.Errorf("%w: empty", ErrBadTenant)
	}
	if strings.Contains(tenant, ":") {
		return fmt.Errorf("%w: %q contains ':', which separates the tenant from the flow id", ErrBadTenant, tenant)
	}
	return nil
}
