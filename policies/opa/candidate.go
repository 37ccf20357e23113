package opa

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/open-policy-agent/opa/v1/storage"
)

// MaxCandidateSize bounds a candidate policy archive.
const MaxCandidateSize = 16 << 20

// Candidate loads a policy that is not served, for the access explorer's
// policy diff (docs/design.md §9.8): archive is a .tar.gz of a policy
// directory (extensions or a replacement, as --policy-dir) or an OPA bundle
// (as --policy-bundle, with a .manifest; signed ones are checked against
// publicKey when it is set). It is compiled and tested exactly as a reload
// would, and decides on a copy of the served policy data. The caller closes
// it.
func (e *Engine) Candidate(ctx context.Context, archive []byte, publicKey string) (*Engine, error) {
	if len(archive) > MaxCandidateSize {
		return nil, policyError("read candidate policy", fmt.Errorf("archive larger than %d bytes", MaxCandidateSize))
	}
	dir, err := os.MkdirTemp("", "provgate-candidate-")
	if err != nil {
		return nil, internal("read candidate policy", err)
	}
	defer os.RemoveAll(dir)
	bundle, err := untar(archive, dir)
	if err != nil {
		return nil, policyError("read candidate policy", err)
	}
	opts := Options{CacheSize: -1, Now: e.now, Verified: e.verified}
	if bundle {
		opts.Bundle = BundleOptions{Location: dir, PublicKey: publicKey}
	} else {
		opts.PolicyDir = dir
	}
	c, err := New(ctx, opts)
	if err != nil {
		return nil, err
	}
	if err := e.copyDataTo(ctx, c); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// copyDataTo gives c the served data.provgate.
func (e *Engine) copyDataTo(ctx context.Context, c *Engine) error {
	v, err := storage.ReadOne(ctx, e.store, storage.Path{"provgate"})
	if err != nil {
		return internal("read policy data", err)
	}
	c.dataMu.Lock()
	defer c.dataMu.Unlock()
	if err := storage.WriteOne(ctx, c.store, storage.ReplaceOp, storage.Path{"provgate"}, v); err != nil {
		return internal("write policy data", err)
	}
	c.dataRev.Add(1)
	return nil
}

// untar writes a .tar.gz into dir, refusing paths that leave it, and
// reports whether it is an OPA bundle (it has a .manifest).
func untar(archive []byte, dir string) (bundle bool, err error) {
	zr, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		return false, fmt.Errorf("not a .tar.gz: %w", err)
	}
	tr := tar.NewReader(zr)
	var total int64
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return bundle, nil
		}
		if err != nil {
			return false, err
		}
		name := filepath.Clean(strings.TrimPrefix(h.Name, "/"))
		if name == "." || strings.HasPrefix(name, "..") || filepath.IsAbs(name) {
			continue
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(filepath.Join(dir, name), 0o700); err != nil {
				return false, err
			}
		case tar.TypeReg:
			total += h.Size
			if total > 4*MaxCandidateSize {
				return false, fmt.Errorf("archive expands beyond %d bytes", 4*MaxCandidateSize)
			}
			if filepath.Base(name) == ".manifest" {
				bundle = true
			}
			if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o700); err != nil {
				return false, err
			}
			f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
			if err != nil {
				return false, err
			}
			_, err = io.Copy(f, io.LimitReader(tr, h.Size))
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return false, err
			}
		}
	}
}
