package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// logReceiver is an HTTP decision-log receiver as OPA's service API
// describes it: POST, Content-Encoding: gzip, a JSON array of events.
type logReceiver struct {
	*httptest.Server
	// waiting gets a value when an upload arrives that the receiver holds.
	waiting chan struct{}
	mu      sync.Mutex
	events  []map[string]any
	raw     []string // the decompressed bodies
	bad     []string // requests that were not well-formed uploads
}

func newLogReceiver(t *testing.T, hang <-chan struct{}) *logReceiver {
	t.Helper()
	lr := &logReceiver{waiting: make(chan struct{}, 1)}
	lr.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hang != nil {
			select {
			case lr.waiting <- struct{}{}:
			default:
			}
			select {
			case <-hang:
			case <-r.Context().Done():
				return
			}
		}
		fail := func(why string) {
			lr.mu.Lock()
			lr.bad = append(lr.bad, why)
			lr.mu.Unlock()
			w.WriteHeader(400)
		}
		if r.Method != "POST" || r.URL.Path != "/logs" || r.Header.Get("Content-Encoding") != "gzip" ||
			r.Header.Get("Content-Type") != "application/json" {
			fail(r.Method + " " + r.URL.Path + " " + r.Header.Get("Content-Encoding") + " " + r.Header.Get("Content-Type"))
			return
		}
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			fail("not gzip: " + err.Error())
			return
		}
		body, err := io.ReadAll(zr)
		if err != nil {
			fail("gzip: " + err.Error())
			return
		}
		var evs []map[string]any
		if err := json.Unmarshal(body, &evs); err != nil {
			fail("not a JSON array: " + err.Error())
			return
		}
		lr.mu.Lock()
		lr.events = append(lr.events, evs...)
		lr.raw = append(lr.raw, string(body))
		lr.mu.Unlock()
		w.WriteHeader(204)
	}))
	t.Cleanup(lr.Close)
	return lr
}

// withRequest returns the events received for request id, waiting up to d
// for at least one.
func (lr *logReceiver) withRequest(t *testing.T, id string, d time.Duration) []map[string]any {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		lr.mu.Lock()
		var out []map[string]any
		for _, e := range lr.events {
			if e["request_id"] == id {
				out = append(out, e)
			}
		}
		lr.mu.Unlock()
		if len(out) > 0 {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("no decision of request %s shipped within %s", id, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestE2EDecisionLogShipped: with --decision-log-url, decisions reach an
// HTTP receiver batched and gzipped in OPA's upload format, with OPA's
// labels, masked as the file's lines are (the shipped events are the
// file's lines), and the URL may be a loopback address without
// --callback-allow: it is the operator's configuration, not a callback
// destination.
func TestE2EDecisionLogShipped(t *testing.T) {
	t.Parallel()
	for _, db := range databases(t) {
		t.Run(db.Name, func(t *testing.T) {
			t.Parallel()
			lr := newLogReceiver(t, nil)
			dir := t.TempDir()
			// The extension reads the proposed object, so it is in the
			// policy input, and in the logged one, masked.
			writeExtFile(t, dir, "desc.rego", `package provgate.ext.desc

deny contains "machine descriptions may not say forbidden" if input.proposed.Description == "forbidden"
`)
			file := filepath.Join(t.TempDir(), "decisions.jsonl")
			s := startE2E(t, db, "--policy-dir", dir, "--decision-log", file, "--decision-log-url", lr.URL+"/logs")
			s.Must(200, "GET", "/info", nil, admin(), "X-Request-Id", "ship-info-1")
			s.Must(201, "POST", "/users", map[string]any{"Name": "ship-u", "Password": "hunter2-shipped-password"}, admin(),
				"X-Request-Id", "ship-user-1")
			// A credential-shaped string is masked by the decision log itself.
			s.Must(201, "POST", "/machines", map[string]any{"Name": "ship-m", "Description": "Bearer hunter2-shipped-token"}, admin(),
				"X-Request-Id", "ship-machine-1")
			refused := s.Do("GET", "/users", nil, basic("ship-u", "hunter2-shipped-password"), "X-Request-Id", "ship-denied-1")
			if refused.Status != 403 {
				t.Fatalf("a user without roles lists users: %s", refused)
			}

			info := lr.withRequest(t, "ship-info-1", 10*time.Second)[0]
			labels, _ := info["labels"].(map[string]any)
			if labels["app"] != "provgate" || labels["version"] == "" || labels["id"] == "" {
				t.Errorf("labels %v", info["labels"])
			}
			for _, f := range []string{"decision_id", "path", "input", "result", "timestamp", "bundles"} {
				if info[f] == nil {
					t.Errorf("shipped event without %s: %v", f, info)
				}
			}
			if info["path"] != "provgate/authz/decision" {
				t.Errorf("path %v", info["path"])
			}
			if res, _ := info["result"].(map[string]any); res["allow"] != true {
				t.Errorf("GET /info by the admin shipped as %v", info["result"])
			}
			denied := lr.withRequest(t, "ship-denied-1", 10*time.Second)[0]
			if res, _ := denied["result"].(map[string]any); res["allow"] != false {
				t.Errorf("the refused request shipped as %v", denied["result"])
			}
			lr.withRequest(t, "ship-user-1", 10*time.Second)
			var masked bool
			for _, e := range lr.withRequest(t, "ship-machine-1", 10*time.Second) {
				ms, _ := e["masked"].([]any)
				for _, m := range ms {
					masked = masked || m == "/input/proposed/Description"
				}
			}
			if !masked {
				t.Errorf("the credential-shaped Description is not listed as masked in the shipped events")
			}

			s.Stop()
			lr.mu.Lock()
			defer lr.mu.Unlock()
			if len(lr.bad) > 0 {
				t.Fatalf("malformed uploads: %v", lr.bad)
			}
			for _, b := range lr.raw {
				if strings.Contains(b, "hunter2") {
					t.Fatalf("a secret reached the receiver: %s", b)
				}
			}
			// Every decision written is shipped, and the same one.
			written, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			ids := map[string]bool{}
			for _, e := range lr.events {
				ids[e["decision_id"].(string)] = true
			}
			lines := strings.Split(strings.TrimSpace(string(written)), "\n")
			for _, l := range lines {
				var e map[string]any
				if err := json.Unmarshal([]byte(l), &e); err != nil {
					t.Fatal(err)
				}
				if !ids[e["decision_id"].(string)] {
					t.Errorf("decision %v written but not shipped", e["decision_id"])
				}
			}
			if len(lr.events) != len(lines) {
				t.Errorf("%d decisions shipped, %d written", len(lr.events), len(lines))
			}
		})
	}
}

// TestE2EDecisionLogReceiverDown: a receiver that never answers holds up no
// request; what does not fit the bounded buffer is dropped and counted in
// provgate_decision_log_dropped_total{stage="http"}.
func TestE2EDecisionLogReceiverDown(t *testing.T) {
	t.Parallel()
	forEachDBHang(t, func(t *testing.T, s *tserver, lr *logReceiver) {
		// The first upload is held by the receiver; what follows queues.
		s.Must(200, "GET", "/info", nil, admin())
		select {
		case <-lr.waiting:
		case <-time.After(10 * time.Second):
			t.Fatal("no upload reached the receiver")
		}
		for i := 0; i < 40; i++ {
			start := time.Now()
			s.Must(200, "GET", "/info", nil, admin())
			if d := time.Since(start); d > 2*time.Second {
				t.Fatalf("request %d took %s with the receiver down", i, d)
			}
		}
		var dropped float64
		for deadline := time.Now().Add(10 * time.Second); dropped == 0 && time.Now().Before(deadline); {
			dropped = s.scrape(t).value("provgate_decision_log_dropped_total", "stage", "http")
			time.Sleep(50 * time.Millisecond)
		}
		if dropped < 1 {
			t.Fatalf("no decision counted as dropped with the receiver down and a buffer of 4")
		}
	})
}

// forEachDBHang runs f on a server per database whose --decision-log-url
// receiver accepts connections but never answers until the test ends.
func forEachDBHang(t *testing.T, f func(t *testing.T, s *tserver, lr *logReceiver)) {
	for _, db := range databases(t) {
		t.Run(db.Name, func(t *testing.T) {
			t.Parallel()
			hang := make(chan struct{})
			lr := newLogReceiver(t, hang)
			s := startE2E(t, db, "--decision-log-url", lr.URL+"/logs", "--decision-log-url-buffer", "4")
			// Released before the server stops (cleanups run last first),
			// so its last upload is answered.
			t.Cleanup(func() { close(hang) })
			f(t, s, lr)
		})
	}
}

// TestE2EDecisionLogReopen: logrotate's way, rename the file then SIGHUP,
// leaves the old lines in the renamed file and sends new ones to a new file
// at the configured path. SIGHUP reaches the server through its own reload
// channel.
func TestE2EDecisionLogReopen(t *testing.T) {
	t.Parallel()
	for _, db := range databases(t) {
		t.Run(db.Name, func(t *testing.T) {
			t.Parallel()
			file := filepath.Join(t.TempDir(), "decisions.jsonl")
			s := startE2E(t, db, "--decision-log", file)
			s.Must(200, "GET", "/info", nil, admin(), "X-Request-Id", "before-rotate")
			waitFileHas(t, file, "before-rotate")
			rotated := file + ".1"
			if err := os.Rename(file, rotated); err != nil {
				t.Fatal(err)
			}
			reopened := countLines(s.Stderr.String(), "decision log reopened")
			s.Reload <- syscall.SIGHUP
			for deadline := time.Now().Add(time.Minute); countLines(s.Stderr.String(), "decision log reopened") == reopened; {
				if time.Now().After(deadline) {
					t.Fatalf("no reopen logged after SIGHUP:\n%s", s.Stderr.String())
				}
				time.Sleep(20 * time.Millisecond)
			}
			s.Must(200, "GET", "/info", nil, admin(), "X-Request-Id", "after-rotate")
			waitFileHas(t, file, "after-rotate")
			s.Stop()
			newLines, _ := os.ReadFile(file)
			oldLines, _ := os.ReadFile(rotated)
			if bytes.Contains(newLines, []byte("before-rotate")) || !bytes.Contains(oldLines, []byte("before-rotate")) {
				t.Errorf("the line before the rotation is not (only) in the rotated file")
			}
			if bytes.Contains(oldLines, []byte("after-rotate")) {
				t.Errorf("a line after the rotation went to the rotated file")
			}
			if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("the new file: %v %v", fi.Mode(), err)
			}
		})
	}
}

// waitFileHas waits until file contains s.
func waitFileHas(t *testing.T, file, s string) {
	t.Helper()
	// Generous: a loaded machine writes late; a pass returns at once.
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(file)
		if bytes.Contains(b, []byte(s)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never got %q:\n%s", file, s, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
