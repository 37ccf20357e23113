package opa

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Where decision-log lines go (docs/design.md §9.5): a file, reopened on
// SIGHUP so that logrotate can move it away, and an HTTP endpoint that
// receives them batched and gzipped in OPA's decision-log upload format.
// Both receive the lines the engine's writer goroutine has already encoded
// and masked, so what is shipped is exactly what is written.

// LogFile is an append-only decision log file that Reopen switches to a new
// file at the same path.
type LogFile struct {
	mu   sync.Mutex
	path string
	f    *os.File
}

// OpenLogFile opens (creating, mode 0600) the decision log at path.
func OpenLogFile(path string) (*LogFile, error) {
	f, err := openAppend(path)
	if err != nil {
		return nil, err
	}
	return &LogFile{path: path, f: f}, nil
}

func openAppend(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
}

// Write appends p to the current file.
func (l *LogFile) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return 0, os.ErrClosed
	}
	return l.f.Write(p)
}

// Reopen opens the path again and writes there from now on: after
// logrotate renamed the file, new lines go to a new file at the old name.
// When the path cannot be opened the old file is kept.
func (l *LogFile) Reopen() error {
	f, err := openAppend(l.path)
	if err != nil {
		return fmt.Errorf("decision log %s: %w", l.path, err)
	}
	l.mu.Lock()
	old := l.f
	l.f = f
	l.mu.Unlock()
	if old != nil {
		return old.Close()
	}
	return nil
}

// Close closes the file.
func (l *LogFile) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// Tee writes each line to every writer, all of them even when one fails
// (the first error is returned). Its Dropped sums the writers' own.
type Tee []io.Writer

func (t Tee) Write(p []byte) (int, error) {
	var first error
	for _, w := range t {
		if _, err := w.Write(p); err != nil && first == nil {
			first = err
		}
	}
	return len(p), first
}

// Dropped merges the drops the writers count.
func (t Tee) Dropped() map[string]uint64 {
	out := map[string]uint64{}
	for _, w := range t {
		if d, ok := w.(interface{ Dropped() map[string]uint64 }); ok {
			for k, v := range d.Dropped() {
				out[k] += v
			}
		}
	}
	return out
}

// ShipperOptions configure a Shipper.
type ShipperOptions struct {
	// URL receives the uploads: POST, Content-Encoding: gzip, a JSON
	// array of decision events (OPA's decision log service API).
	URL string
	// Client sends them; nil uses one with a 10s timeout.
	Client *http.Client
	// Labels are added to every event as OPA's "labels" (app, id,
	// version).
	Labels map[string]string
	// Buffer bounds the events waiting to be sent (10000); when full, new
	// events are dropped and counted, never waited for.
	Buffer int
	// Batch is the most events one upload carries (500).
	Batch int
	// Interval is the longest an event waits for its batch to fill (1s).
	Interval time.Duration
	// Logger receives upload failures (once per outage) and recoveries.
	Logger *slog.Logger
}

// Shipper sends decision-log lines to an HTTP endpoint from its own
// goroutine. Write never blocks: a receiver that is down or slow fills the
// bounded buffer, and what does not fit is dropped and counted (Dropped),
// so requests are never held up by it. A batch that failed is tried again
// with a growing pause (up to a minute) while new events queue behind it.
type Shipper struct {
	o       ShipperOptions
	labels  []byte // `"labels":{...},` spliced into each event
	ch      chan []byte
	dropped atomic.Uint64
	sent    atomic.Uint64
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
}

// NewShipper starts a shipper.
func NewShipper(o ShipperOptions) (*Shipper, error) {
	if o.URL == "" {
		return nil, errors.New("decision log url: empty")
	}
	if o.Client == nil {
		o.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if o.Buffer <= 0 {
		o.Buffer = 10000
	}
	if o.Batch <= 0 {
		o.Batch = 500
	}
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Shipper{o: o, ch: make(chan []byte, o.Buffer), stop: make(chan struct{}), done: make(chan struct{})}
	if len(o.Labels) > 0 {
		b, err := json.Marshal(o.Labels)
		if err != nil {
			return nil, err
		}
		s.labels = append(append([]byte(`"labels":`), b...), ',')
	}
	go s.run()
	return s, nil
}

// Write queues one decision-log line (a JSON object, with or without its
// newline); it never blocks.
func (s *Shipper) Write(p []byte) (int, error) {
	ev := bytes.TrimSpace(p)
	if len(ev) < 2 || ev[0] != '{' {
		return len(p), nil
	}
	e := make([]byte, 0, len(ev)+len(s.labels))
	e = append(e, '{')
	if len(ev) > 2 {
		e = append(e, s.labels...)
	}
	e = append(e, ev[1:]...)
	select {
	case s.ch <- e:
	default:
		s.dropped.Add(1)
	}
	return len(p), nil
}

// Dropped counts the events the buffer had no room for, as stage "http".
func (s *Shipper) Dropped() map[string]uint64 { return map[string]uint64{"http": s.dropped.Load()} }

// Sent counts the events the receiver accepted.
func (s *Shipper) Sent() uint64 { return s.sent.Load() }

// Close sends what is queued, trying for at most wait, and stops.
func (s *Shipper) Close(wait time.Duration) {
	s.once.Do(func() { close(s.stop) })
	select {
	case <-s.done:
	case <-time.After(wait):
	}
}

func (s *Shipper) run() {
	defer close(s.done)
	var batch [][]byte
	failing := false
	pause := time.Second
	flush := func() bool {
		if len(batch) == 0 {
			return true
		}
		if err := s.upload(context.Background(), batch); err != nil {
			if !failing {
				s.o.Logger.Warn("decision log upload failed; events queue and are dropped when the buffer is full",
					"url", redactURL(s.o.URL), "err", err.Error())
			}
			failing = true
			return false
		}
		if failing {
			s.o.Logger.Info("decision log upload works again", "url", redactURL(s.o.URL))
		}
		failing = false
		pause = time.Second
		s.sent.Add(uint64(len(batch)))
		batch = batch[:0]
		return true
	}
	timer := time.NewTimer(s.o.Interval)
	defer timer.Stop()
	for {
		// A full batch takes nothing more until it is sent: the buffer
		// holds the rest, and drops what it cannot.
		in := s.ch
		if len(batch) >= s.o.Batch {
			in = nil
		}
		select {
		case e := <-in:
			batch = append(batch, e)
			if len(batch) < s.o.Batch {
				continue
			}
		case <-timer.C:
		case <-s.stop:
			s.drain(&batch, flush)
			return
		}
		if flush() {
			timer.Reset(s.o.Interval)
			continue
		}
		// Keep the batch and pause before the next try; new events wait
		// in the buffer meanwhile.
		timer.Reset(pause)
		pause = min(2*pause, time.Minute)
	}
}

// drain sends what is queued at Close, batch by batch, until the queue is
// empty or an upload fails.
func (s *Shipper) drain(batch *[][]byte, flush func() bool) {
	for {
	fill:
		for len(*batch) < s.o.Batch {
			select {
			case e := <-s.ch:
				*batch = append(*batch, e)
			default:
				break fill
			}
		}
		if len(*batch) == 0 || !flush() {
			return
		}
	}
}

// redactURL hides a password in the URL for logs.
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "<unparsable URL>"
	}
	return p.Redacted()
}

// upload posts one batch as a gzipped JSON array.
func (s *Shipper) upload(ctx context.Context, batch [][]byte) error {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write([]byte{'['})
	for i, e := range batch {
		if i > 0 {
			_, _ = zw.Write([]byte{','})
		}
		_, _ = zw.Write(e)
	}
	_, _ = zw.Write([]byte{']'})
	if err := zw.Close(); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.o.URL, &buf)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Content-Encoding", "gzip")
	res, err := s.o.Client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	_ = res.Body.Close()
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("receiver answered %s", res.Status)
	}
	return nil
}
