package main

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/fenceline/fenceline/core/transport"
	"github.com/fenceline/fenceline/realnet"
)

// loadKey reads a cluster key: from file if one is named, otherwise from
// dir/name, which is generated (64 hex digits, mode 0600) if absent. A key
// file holds the 32 bytes raw or as 64 hex digits, with an optional
// trailing newline; anything else is refused with its length, never
// stretched or truncated into a key.
func loadKey(file, dir, name string) ([]byte, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("%w: key file: %v", errUsage, err)
		}
		return parseKey(file, b)
	}
	path := filepath.Join(dir, name)
	b, err := os.ReadFile(path)
	if err == nil {
		return parseKey(path, b)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: key file: %v", errUsage, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("%w: data dir: %v", errUsage, err)
	}
	k := realnet.GenerateKey()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%w: generate %s: %v", errUsage, path, err)
	}
	if _, err := f.WriteString(hex.EncodeToString(k) + "\n"); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("%w: generate %s: %v", errUsage, path, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("%w: generate %s: %v", errUsage, path, err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("%w: generate %s: %v", errUsage, path, err)
	}
	return k, nil
}

func parseKey(path string, b []byte) ([]byte, error) {
	if len(b) == transport.KeySize {
		return b, nil
	}
	t := bytes.TrimSuffix(bytes.TrimSuffix(b, []byte("\n")), []byte("\r"))
	if len(t) == 2*transport.KeySize {
		if k, err := hex.DecodeString(string(t)); err == nil {
			return k, nil
		}
	}
	return nil, fmt.Errorf("%w: key file %s holds %d bytes; want %d raw bytes or %d hex digits",
		errUsage, path, len(b), transport.KeySize, 2*transport.KeySize)
}
