package scenarios

import (
	"math/rand/v2"
	"strings"
	"time"

	"github.com/fenceline/fenceline/core/transport"
	"github.com/fenceline/fenceline/sim"
)

// operator is the runs' cluster operator: it holds the control key and
// attests each admin act with it (transport.Keys.Attest), as `node
// remove` and a joining node do for a real one, with a nonce drawn
// afresh from the run's stream.
type operator struct {
	k      *sim.Kernel
	stream string // the stream its nonces are drawn from
	// key is the control key it attests with: the nodes' own, or one they
	// still accept amid a rotation.
	key []byte
	// pad: each attestation is written exactly transport.MaxAttestationText
	// long (its issue time led by zeros), which is good.
	pad    bool
	nonces *rand.Rand
}

// attest is the operator's attestation of act with fields, now by true
// time.
func (o *operator) attest(act string, fields []string) string {
	return o.attestAt(o.key, act, fields, o.k.Now())
}

// attestAt is an attestation of act with fields made with key at true
// time at (the adversary's too).
func (o *operator) attestAt(key []byte, act string, fields []string, at time.Duration) string {
	var nonce [transport.AttestNonceSize]byte
	if o.nonces == nil {
		o.nonces = o.k.Stream(o.stream) // one for the run: each nonce afresh
	}
	for i := range nonce {
		nonce[i] = byte(o.nonces.Uint32())
	}
	a, err := transport.Keys{Control: key}.Attest(act, fields, sim.Epoch.Add(at), nonce)
	if err != nil {
		panic(err) // the harness's key: a bug, not input
	}
	if !o.pad {
		return a.String()
	}
	parts := strings.Split(a.String(), ".")
	parts[2] = strings.Repeat("0", transport.MaxAttestationText-len(a.String())) + parts[2]
	return strings.Join(parts, ".")
}
