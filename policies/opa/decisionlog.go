package opa

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/provgate/provgate/policies"
)

// decisionLog writes decisions as JSON lines in OPA's decision-log shape
// from its own goroutine. The request path only does a non-blocking send:
// when the buffer is full the decision is dropped and counted, because a
// slow log must never slow or stop authorization.
type decisionLog struct {
	w       io.Writer
	logger  *slog.Logger
	ch      chan logEvent
	done    chan struct{}
	dropped atomic.Uint64

	mu     sync.RWMutex // guards closed against sends on a closed channel
	closed bool
}

type logEvent struct {
	input  []byte // the input's JSON, taken when Decide ran
	result policies.Decision
	at     time.Time
	eval   time.Duration // 0 for a cached decision
	// requestID is the request's X-Request-Id; revision the policy's.
	requestID, revision string
	cached              bool
	// nd holds the non-deterministic built-in calls of the evaluation
	// (OPA's nd_builtin_cache), nil when it made none.
	nd any
}

// logLine is one decision-log entry (OPA's names; "masked" lists the
// JSON pointers of input values replaced because they are secrets (see
// mask), and "truncated" how many entries each cut list lost, by its
// pointer).
type logLine struct {
	DecisionID string                    `json:"decision_id"`
	RequestID  string                    `json:"request_id,omitempty"`
	Revision   string                    `json:"revision"`
	Bundles    map[string]bundleRevision `json:"bundles"`
	Cached     bool                      `json:"cached"`
	Path       string                    `json:"path"`
	Input      any                       `json:"input"`
	Result     policies.Decision         `json:"result"`
	Timestamp  time.Time                 `json:"timestamp"`
	Metrics    map[string]int64          `json:"metrics,omitempty"`
	Masked     []string                  `json:"masked,omitempty"`
	Truncated  map[string]int            `json:"truncated,omitempty"`
	NDBuiltins any                       `json:"nd_builtin_cache,omitempty"`
}

// bundleRevision is OPA's per-bundle entry of a decision-log line: the policy is
// named "provgate" whether embedded, a directory or a bundle.
type bundleRevision struct {
	Revision string `json:"revision"`
}

// What one decision-log line holds at most: a request can need a claim per
// patch op, and each claim a refusal reason, so lists are cut to their first
// maxLogList entries (the line says how many it left out, under
// "truncated") and strings to maxLogString bytes.
const (
	maxLogList   = 32
	maxLogString = 1024
)

func startDecisionLog(w io.Writer, size int, logger *slog.Logger) *decisionLog {
	l := &decisionLog{w: w, logger: logger, ch: make(chan logEvent, size), done: make(chan struct{})}
	go l.run()
	return l
}

func (l *decisionLog) add(ev logEvent) {
	if l == nil {
		return
	}
	ev.result, ev.at = ev.result.Clone(), time.Now()
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return
	}
	select {
	case l.ch <- ev:
	default:
		l.dropped.Add(1)
	}
}

func (l *decisionLog) close() {
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		close(l.ch)
	}
	l.mu.Unlock()
	<-l.done
}

func (l *decisionLog) run() {
	defer close(l.done)
	for ev := range l.ch {
		line, err := encodeLine(ev)
		if err == nil {
			_, err = l.w.Write(line)
		}
		if err != nil {
			l.logger.Error("decision log", "err", err)
		}
	}
}

func encodeLine(ev logEvent) ([]byte, error) {
	var input any
	if err := json.Unmarshal(ev.input, &input); err != nil {
		return nil, err
	}
	var masked []string
	input = mask(input, "/input", &masked)
	sort.Strings(masked)
	truncated := map[string]int{}
	input = bound(input, "/input", truncated)
	result := ev.result
	if n := len(result.Reasons); n > maxLogList {
		result.Reasons = result.Reasons[:maxLogList]
		truncated["/result/reasons"] = n - maxLogList
	}
	for i, r := range result.Reasons {
		result.Reasons[i] = boundString(r)
	}
	if result.Visible != nil && len(result.Visible.Keys) > maxLogList {
		v := *result.Visible
		truncated["/result/visible/keys"] = len(v.Keys) - maxLogList
		v.Keys = v.Keys[:maxLogList]
		result.Visible = &v
	}
	if len(truncated) == 0 {
		truncated = nil
	}
	line := logLine{
		DecisionID: newDecisionID(),
		RequestID:  ev.requestID,
		Revision:   ev.revision,
		Bundles:    map[string]bundleRevision{"provgate": {Revision: ev.revision}},
		Cached:     ev.cached,
		NDBuiltins: ev.nd,
		Path:       "provgate/authz/decision",
		Input:      input,
		Result:     result,
		Timestamp:  ev.at.UTC(),
		Masked:     masked,
		Truncated:  truncated,
	}
	if ev.eval > 0 {
		line.Metrics = map[string]int64{"timer_rego_query_eval_ns": ev.eval.Nanoseconds()}
	}
	b, err := json.Marshal(line)
	return append(b, '\n'), err
}

// bound cuts every list of v longer than maxLogList and every string longer
// than maxLogString, recording in truncated how many entries each list lost.
func bound(v any, path string, truncated map[string]int) any {
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			x[k] = bound(val, path+"/"+strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1"), truncated)
		}
	case []any:
		if len(x) > maxLogList {
			truncated[path] = len(x) - maxLogList
			x = x[:maxLogList]
		}
		for i, val := range x {
			x[i] = bound(val, fmt.Sprintf("%s/%d", path, i), truncated)
		}
		return x
	case string:
		return boundString(x)
	}
	return v
}

// boundString cuts s to maxLogString bytes (on a rune boundary), saying so.
func boundString(s string) string {
	if len(s) <= maxLogString {
		return s
	}
	cut := maxLogString
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s...(%d more bytes)", s[:cut], len(s)-cut)
}

// newDecisionID returns a random UUID (version 4).
func newDecisionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
