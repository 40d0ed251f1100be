package kv

import "fmt"

// opFields is a set of the optional fields of an Op.
type opFields uint8

const (
	fieldKey opFields = 1 << iota
	fieldValue
	fieldHolder
	fieldTTL
	fieldTxn
)

// uses lists the fields each kind reads; the rest must be zero.
var uses = [opKindEnd]opFields{
	OpPut:          fieldKey | fieldValue,
	OpDelete:       fieldKey,
	OpTxn:          fieldTxn,
	OpLeaseAcquire: fieldKey | fieldHolder | fieldTTL,
	OpLeaseRenew:   fieldKey | fieldHolder | fieldTTL,
	OpLeaseRelease: fieldKey | fieldHolder,
	OpTick:         0,
}

// set returns the fields op has non-zero.
func (op Op) set() opFields {
	var f opFields
	if op.Key != "" {
		f |= fieldKey
	}
	if len(op.Value) > 0 {
		f |= fieldValue
	}
	if op.Holder != "" {
		f |= fieldHolder
	}
	if op.TTLMs != 0 {
		f |= fieldTTL
	}
	if len(op.Guards)+len(op.OnSuccess)+len(op.OnFailure) > 0 {
		f |= fieldTxn
	}
	return f
}

// checkShape reports what makes cmd ill formed regardless of any Config:
// an unknown kind, a field its kind does not use, a txn branch holding
// something other than Put or Delete, a stamp out of range. Everything
// DecodeCommand returns passes it, and EncodeCommand accepts only what
// passes it, so a shaped command survives encoding unchanged.
func checkShape(cmd Command) error {
	if cmd.AtMs < 0 || cmd.AtMs > MaxAtMs {
		return fmt.Errorf("AtMs %d outside [0, %d]", cmd.AtMs, MaxAtMs)
	}
	return checkOpShape(cmd.Op, false)
}

func checkOpShape(op Op, inTxn bool) error {
	if op.Kind == OpInvalid || op.Kind >= opKindEnd {
		return fmt.Errorf("unknown op kind %d", uint8(op.Kind))
	}
	if inTxn && op.Kind != OpPut && op.Kind != OpDelete {
		return fmt.Errorf("%v inside a txn (only put and delete may be)", op.Kind)
	}
	if extra := op.set() &^ uses[op.Kind]; extra != 0 {
		return fmt.Errorf("%v op sets fields it does not use (%s)", op.Kind, extra)
	}
	if op.TTLMs < 0 {
		return fmt.Errorf("negative TTLMs %d", op.TTLMs)
	}
	for _, g := range op.Guards {
		if err := checkGuardShape(g); err != nil {
			return err
		}
	}
	for _, branch := range [][]Op{op.OnSuccess, op.OnFailure} {
		for _, sub := range branch {
			if err := checkOpShape(sub, true); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkGuardShape(g Guard) error {
	switch g.Kind {
	case GuardVersionIs:
	case GuardAbsent:
		if g.Version != 0 || len(g.Value) > 0 {
			return fmt.Errorf("absent guard on %q carries a version or value", g.Key)
		}
	case GuardValueIs:
		if g.Version != 0 {
			return fmt.Errorf("value guard on %q carries a version", g.Key)
		}
	default:
		return fmt.Errorf("unknown guard kind %d", uint8(g.Kind))
	}
	return nil
}

func (f opFields) String() string {
	names := []string{"key", "value", "holder", "ttl", "txn"}
	s := ""
	for i, n := range names {
		if f&(1<<i) != 0 {
			if s != "" {
				s += ","
			}
			s += n
		}
	}
	return s
}

// Validate reports whether cmd may be proposed under c, wrapping
// ErrInvalid. Proposers call it to refuse early with a clear error; apply
// checks the same rules again, deterministically, because an entry can come
// from a proposer that did not.
func (c Config) Validate(cmd Command) error {
	c = c.withDefaults()
	if err := checkShape(cmd); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if err := c.checkOp(cmd.Op); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if n := commandSize(cmd); n > c.MaxCommandBytes {
		return fmt.Errorf("%w: encoded command is %d bytes, limit %d", ErrInvalid, n, c.MaxCommandBytes)
	}
	return nil
}

// checkOp checks the Config bounds of a shaped op.
func (c Config) checkOp(op Op) error {
	if op.Kind == OpTick {
		return nil
	}
	if op.Kind == OpTxn {
		if n := len(op.Guards); n > c.MaxTxnOps {
			return fmt.Errorf("txn has %d guards, limit %d", n, c.MaxTxnOps)
		}
		if n := len(op.OnSuccess) + len(op.OnFailure); n > c.MaxTxnOps {
			return fmt.Errorf("txn has %d ops, limit %d", n, c.MaxTxnOps)
		}
		for _, g := range op.Guards {
			if err := c.checkName("guard key", g.Key); err != nil {
				return err
			}
			if len(g.Value) > c.MaxValueBytes {
				return fmt.Errorf("guard value on %q is %d bytes, limit %d", g.Key, len(g.Value), c.MaxValueBytes)
			}
		}
		for _, branch := range [][]Op{op.OnSuccess, op.OnFailure} {
			for _, sub := range branch {
				if err := c.checkOp(sub); err != nil {
					return err
				}
			}
		}
		return nil
	}
	what := "key"
	if op.Kind >= OpLeaseAcquire {
		what = "lease name"
	}
	if err := c.checkName(what, op.Key); err != nil {
		return err
	}
	if c.Bugs.BoundPlusOne && len(op.Value) == c.MaxValueBytes+1 {
		return nil // the planted bug: one byte past the bound is taken
	}
	if len(op.Value) > c.MaxValueBytes {
		return fmt.Errorf("value of %q is %d bytes, limit %d", op.Key, len(op.Value), c.MaxValueBytes)
	}
	if uses[op.Kind]&fieldHolder != 0 {
		if err := c.checkName("holder", op.Holder); err != nil {
			return err
		}
	}
	if uses[op.Kind]&fieldTTL != 0 && (op.TTLMs < 1 || op.TTLMs > c.MaxLeaseTTLMs) {
		return fmt.Errorf("lease %q TTL %d ms outside [1, %d]", op.Key, op.TTLMs, c.MaxLeaseTTLMs)
	}
	return nil
}

// checkName bounds a key, lease name or holder. Empty ones are refused: an
// empty holder would make a refusal name nobody.
func (c Config) checkName(what, s string) error {
	if s == "" {
		return fmt.Errorf("empty %s", what)
	}
	if len(s) > c.MaxKeyBytes {
		return fmt.Errorf("%s of %d bytes, limit %d", what, len(s), c.MaxKeyBytes)
	}
	return nil
}
