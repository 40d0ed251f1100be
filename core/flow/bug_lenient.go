//fenceline:nomutate the planted LenientFrames bug's decoding: it runs only while that bug is on, so it defends nothing

package flow

// lenientFrame is the planted LenientFrames bug: what readFrame read of
// a frame that failed to decode, kept as if the frame had been whole.
func lenientFrame(frame []byte) msg {
	m, _ := readFrame(frame, false)
	return m
}
