package access

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"os"
	"time"

	"github.com/provgate/provgate/policies"
)

// LoggedDecision is one line of the decision log (--decision-log), as the
// explorer reads it back.
type LoggedDecision struct {
	DecisionID string            `json:"decision_id"`
	Timestamp  time.Time         `json:"timestamp"`
	Input      policies.Input    `json:"input"`
	Result     policies.Decision `json:"result"`
	NDBuiltins json.RawMessage   `json:"nd_builtin_cache"`
	Cached     bool              `json:"cached"`
}

// Replay is how to evaluate the line again as it was decided.
func (l LoggedDecision) Replay() policies.Replay {
	r := policies.Replay{At: l.Timestamp.UnixNano()}
	if len(l.NDBuiltins) > 0 && string(l.NDBuiltins) != "null" {
		r.NDBuiltins = l.NDBuiltins
	}
	return r
}

// tailBytes bounds how much of the log's end is read.
const tailBytes = 8 << 20

// ReadDecisionLog returns the decisions of the last part of the log at
// path, newest first, keeping those keep accepts (nil keeps all), at most
// max of them. A missing file has none.
func ReadDecisionLog(path string, max int, keep func(LoggedDecision) bool) ([]LoggedDecision, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	start := max64(0, fi.Size()-tailBytes)
	if _, err := f.Seek(start, io.SeekStart); err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	var all []LoggedDecision
	first := start > 0
	for sc.Scan() {
		if first {
			// The first line after a seek is likely cut.
			first = false
			continue
		}
		var l LoggedDecision
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.DecisionID == "" {
			continue
		}
		all = append(all, l)
	}
	var out []LoggedDecision
	for i := len(all) - 1; i >= 0 && len(out) < max; i-- {
		if keep == nil || keep(all[i]) {
			out = append(out, all[i])
		}
	}
	return out, sc.Err()
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}
