package main

import (
	"fmt"
	"os"

	"github.com/fenceline/fenceline/core/transport"
)

// Rotating a cluster key (the lead wires the flags into main.go; the
// README's text is core/transport/keys.go's "Key ids and rotation"):
//
//	-accept-control-key-file F   a second control key, accepted but never sealed with
//	-accept-data-key-file F      a second data key, accepted but never sealed with
//
// Every frame, join or removal attestation and peer connection proof
// names the key id of the key it was made with, and a node takes those
// made with either of its two keys of a class. A rotation of the data key
// is three rolling restarts, each finished on every node before the next
// begins (the control key's is the same with the control flags):
//
//  1. -data-key-file OLD -accept-data-key-file NEW  (seal old, accept new)
//  2. -data-key-file NEW -accept-data-key-file OLD  (seal new, accept old)
//  3. -data-key-file NEW                            (the old key is refused; destroy it)
//
// Make the new key with `openssl rand -hex 32 > new.key` (mode 0600). A
// node that joins mid-rotation gets the flags of the phase the cluster is
// in. Skipping a phase splits the cluster: a node sealing with a key its
// peer does not accept is unreachable to it (its frames are dropped and
// counted as envelope_dropped{cause="no-key"}).

// loadAcceptedKeys reads the accepted keys named (an empty name: none)
// into k. Unlike the main key files, they are never generated.
func loadAcceptedKeys(controlFile, dataFile string, k *transport.Keys) error {
	for _, f := range []struct {
		file string
		into *[]byte
	}{{controlFile, &k.AcceptControl}, {dataFile, &k.AcceptData}} {
		if f.file == "" {
			continue
		}
		b, err := os.ReadFile(f.file)
		if err != nil {
			return fmt.Errorf("%w: accepted key file: %v", errUsage, err)
		}
		if *f.into, err = parseKey(f.file, b); err != nil {
			return err
		}
	}
	if err := k.Check(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return nil
}
