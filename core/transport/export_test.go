package transport

// SetGeneration puts a link's sender of class c at generation gen with
// its share sealed, so that the next frame of that class moves to gen+1:
// for testing the last generation without sealing 2^56 frames.
func SetGeneration(l *Link, c Class, gen uint32) {
	s := l.sealers[c]
	s.gen, s.n, s.aead = gen, s.every, s.sec.frameKey(c, l.cfg.Self, l.cfg.Epoch, gen)
}

// AttestUnchecked is Keys.Attest without its check of the key: the
// attestation a forger would make with any key, an empty one too.
func AttestUnchecked(key []byte, act string, fields []string, a Attestation) Attestation {
	a.KeyID = KeyID(key)
	copy(a.MAC[:], attestMAC(key, act, fields, a))
	return a
}
