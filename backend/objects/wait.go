package objects

import (
	"context"
	"time"

	"github.com/provgate/provgate/backend"
)

// Wait serves If-None-Match + "Prefer: wait=" long polls: it returns true as
// soon as prefix/key no longer has etag (a ModelETag value) or is deleted,
// and false when d elapses first or the wait is stopped
// (backend.WithWaitStop). It wakes on Bus events for the object, not
// by polling the database, so changes made by another replica are seen only
// when they reach this replica's Bus.
func (s *CRUD) Wait(ctx context.Context, prefix, key, etag string, d time.Duration) (bool, error) {
	k, err := s.kinds.Lookup(prefix)
	if err != nil {
		return false, err
	}
	rec, err := s.readRecord(ctx, k, key, backend.ReadOp)
	if err != nil {
		return false, err
	}
	native := rec.Key
	changed := func() (bool, error) {
		rec, m, err := s.read(ctx, k, native, backend.ReadOp)
		if err != nil {
			if backend.IsCode(err, backend.ENOTFOUND) {
				return true, nil
			}
			return false, err
		}
		backend.Sanitize(m)
		return backend.ModelETag(m, rec.Rev) != etag, nil
	}
	if s.bus == nil || d <= 0 {
		return changed()
	}
	// Subscribe before the first check so a change between the two is not
	// missed.
	sub := s.bus.Subscribe(16, func(e backend.Event) bool { return e.Type == k.Prefix && e.Key == native })
	defer sub.Close()
	if c, err := changed(); err != nil || c {
		return c, err
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	stop := backend.WaitStop(ctx)
	for {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-stop:
			// The server drains: answer as for a timeout, so the client
			// polls again, on another replica.
			return false, nil
		case <-timer.C:
			return false, nil
		case _, ok := <-sub.C:
			if !ok {
				return false, nil
			}
			if c, err := changed(); err != nil || c {
				return c, err
			}
		}
	}
}
