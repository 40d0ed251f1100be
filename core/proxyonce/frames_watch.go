//fenceline:nomutate the simulator's watchers read claim frames with these (grants, asks and answers); no node calls them, so a mutant here could only blind a judge, never weaken a defence (decodeFrame, which they share with the node, is mutated where it is)

package proxyonce

// FrameInfo is what a claim frame says of itself, for the simulator's
// record (when the owner granted a claim, to whom).
type FrameInfo struct {
	Grant bool  // a claim's answer that grants it
	Token Token // the grant's token
	Key   string
	// Ask is a request its receiver owes an answer (a claim, a record);
	// Answer is such an answer; ID pairs the two. Record: a recording or
	// its answer.
	Ask, Answer, Record bool
	ID                  uint64
}

// DecodeFrame reads a claim frame as the service would.
func DecodeFrame(b []byte) (FrameInfo, error) {
	f, err := decodeFrame(b)
	if err != nil {
		return FrameInfo{}, err
	}
	return FrameInfo{Grant: f.kind == frameClaimResp && f.out == outWon, Token: f.token, Key: f.key,
		Ask: f.kind == frameClaim || f.kind == frameRecord, Answer: f.kind == frameClaimResp || f.kind == frameRecordResp,
		Record: f.kind == frameRecord || f.kind == frameRecordResp, ID: f.id}, nil
}
