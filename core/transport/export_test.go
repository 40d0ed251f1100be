package transport

// SetGeneration puts a link's sender of class c at generation gen with
// its share sealed, so that the next frame of that class moves to gen+1:
// for testing the last generation without sealing 2^56 frames.
func SetGeneration(l *Link, c Class, gen uint32) {
	s := l.sealers[c]
	s.gen, s.n, s.aead = gen, s.every, s.sec.frameKey(c, l.cfg.Self, l.cfg.Epoch, gen)
}
