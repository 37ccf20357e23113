package objects

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/provgate/provgate/backend"
)

const zeroUUID = "00000000-0000-0000-0000-000000000000"

// CreateJob answers a job request (POST /jobs): the next job of
// body.Machine and its outcome. JobNew: a new job in state created, and
// Machine.CurrentJob points to it. JobAgain: the current job was incomplete
// and is handed back (reset to created so the agent's created→running test
// op passes). JobNone with a nil job: nothing to run, after rolling over
// stage:, bootenv: and context: entries (each real change is recorded as a
// finished job) or reaching the end of the task list (WorkflowComplete,
// PoolStatus). Errors: EBADREQUEST without Machine, EINVALID for an unknown
// machine, ECONFLICT when the machine is not runnable or already has a
// created or running job.
func (s *Jobs) CreateJob(ctx context.Context, body []byte) (backend.JobOutcome, *backend.Job, error) {
	var req backend.Job
	if err := json.Unmarshal(body, &req); err != nil {
		return backend.JobNone, nil, bodyError(backend.ActionOp, "jobs", "", err)
	}
	if req.Machine == "" {
		return backend.JobNone, nil, backend.OpError(backend.EBADREQUEST, backend.ActionOp, "jobs", "", "Create request must have Machine field")
	}
	var (
		out backend.JobOutcome
		job *backend.Job
	)
	err := s.inTx(ctx, func(ctx context.Context) error {
		var err error
		out, job, err = s.nextJob(ctx, req.Machine, req.Context)
		return err
	})
	if err != nil {
		return backend.JobNone, nil, err
	}
	return out, job, nil
}

// nextJob is CreateJob inside its transaction, for machine key and the
// agent's context.
func (s *Jobs) nextJob(ctx context.Context, key, agentContext string) (backend.JobOutcome, *backend.Job, error) {
	mrec, mm, err := s.read(ctx, s.kinds.Kind("machines"), key, backend.ActionOp)
	if err != nil {
		if backend.IsCode(err, backend.ENOTFOUND) {
			return backend.JobNone, nil, backend.NewError(backend.EINVALID, "ValidationError", "jobs", "",
				fmt.Sprintf("Machine %s does not exist", key))
		}
		return backend.JobNone, nil, err
	}
	m := mm.(*backend.Machine)
	orig := clone(m).(*backend.Machine)
	conflict := func(msg string) error {
		return backend.NewError(backend.ECONFLICT, "Conflict", "jobs", "", fmt.Sprintf(msg, m.Uuid))
	}
	if !m.Runnable || !m.Available {
		return backend.JobNone, nil, conflict("Machine %s is not runnable")
	}
	cj, cjRev, err := s.currentJob(ctx, m)
	if err != nil {
		return backend.JobNone, nil, err
	}
	if cj != nil {
		switch cj.State {
		case backend.JobCreated, backend.JobRunning:
			if cj.CurrentIndex == m.CurrentTask {
				return backend.JobNone, nil, conflict("Machine %s already has running or created job")
			}
		case backend.JobIncomplete:
			// Handed back as it is: the machine does not change.
			old := clone(cj)
			cj.State = backend.JobCreated
			cj.EndTime = zeroTime
			if err := s.writeJob(ctx, cj.Uuid, cjRev, old, cj); err != nil {
				return backend.JobNone, nil, err
			}
			return backend.JobAgain, cj, nil
		}
	}
	next := m.CurrentTask
	switch {
	case m.CurrentTask < 0:
		next = 0
	case cj != nil && cj.State == backend.JobFinished:
		next = m.CurrentTask + 1
	}
	next, prev, changedStage, err := s.rollOver(ctx, m, next, cj)
	if err != nil {
		return backend.JobNone, nil, err
	}
	out := backend.JobNone
	var job *backend.Job
	switch {
	case next >= len(m.Tasks):
		m.CurrentTask = len(m.Tasks)
		if !m.WorkflowComplete && (m.Workflow != "" || len(m.Tasks) > 0) {
			m.WorkflowComplete = true
			m.PoolStatus = backend.PoolStatusOnComplete(m.PoolStatus)
		}
	case changedStage || m.Context != agentContext:
		// Nothing to run until the agent comes back in the new stage,
		// boot environment or context.
	default:
		j := s.newJob(m, next, prev)
		if err := s.startJob(ctx, m, j, prev); err != nil {
			return backend.JobNone, nil, err
		}
		m.CurrentTask = next
		out, job = backend.JobNew, j
	}
	if err := s.writeMachine(ctx, mrec.Key, mrec.Rev, orig, m); err != nil {
		return backend.JobNone, nil, err
	}
	return out, job, nil
}

// currentJob loads m's current job and its revision; nil when m has none
// or it was deleted.
func (s *Jobs) currentJob(ctx context.Context, m *backend.Machine) (*backend.Job, int64, error) {
	if m.CurrentJob == "" {
		return nil, 0, nil
	}
	rec, err := s.st.Get(ctx, "jobs", m.CurrentJob)
	if backend.IsCode(err, backend.ENOTFOUND) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	jm, err := decodeRecord(s.kinds.Kind("jobs"), rec.Data)
	if err != nil {
		return nil, 0, err
	}
	return jm.(*backend.Job), rec.Rev, nil
}

// rollOver applies the stage:, bootenv: and context: entries of m's task
// list from index next on, recording each real change as a finished job
// after prev. It returns the index of the first task entry (len(m.Tasks)
// at the end of the list), the last job recorded (prev when none) and
// whether the stage or boot environment changed.
func (s *Jobs) rollOver(ctx context.Context, m *backend.Machine, next int, prev *backend.Job) (int, *backend.Job, bool, error) {
	changedStage := false
	for ; next < len(m.Tasks); next++ {
		kind, val, ok := strings.Cut(m.Tasks[next], ":")
		if !ok || (kind != "stage" && kind != "bootenv" && kind != "context") {
			break
		}
		var note string
		switch kind {
		case "stage":
			if m.Stage != val {
				note = fmt.Sprintf("Stage changed from %s to %s\n", m.Stage, val)
				m.Params["change-stage/map"] = map[string]any{m.Stage: val}
				m.Stage = val
				changedStage = true
			}
		case "bootenv":
			if m.BootEnv != val {
				note = fmt.Sprintf("BootEnv changed from %s to %s\n", m.BootEnv, val)
				m.BootEnv = val
				changedStage = true
			}
		case "context":
			if m.Context != val {
				note = fmt.Sprintf("Context changed from %s to %s\n", m.Context, val)
				m.Context = val
			}
		}
		m.CurrentTask = next
		if note == "" {
			continue
		}
		j := s.newJob(m, next, prev)
		j.State, j.ExitState, j.EndTime = backend.JobFinished, "complete", s.now()
		if err := s.startJob(ctx, m, j, prev); err != nil {
			return next, prev, changedStage, err
		}
		if s.logs != nil {
			if err := s.logs.AppendJobLog(ctx, j.Uuid, []byte(note)); err != nil {
				return next, prev, changedStage, err
			}
		}
		prev = j
	}
	return next, prev, changedStage, nil
}

var zeroTime = backend.Job{}.EndTime

// newJob builds the job for task index i of m.
func (s *Jobs) newJob(m *backend.Machine, i int, prev *backend.Job) *backend.Job {
	j := &backend.Job{
		Uuid: uuid.NewString(), Previous: zeroUUID, Machine: m.Uuid, Task: m.Tasks[i], Stage: m.Stage,
		Context: m.Context, State: backend.JobCreated, StartTime: s.now(), Current: true,
		CurrentIndex: i, NextIndex: i + 1, Workflow: m.Workflow, BootEnv: m.BootEnv,
	}
	if prev != nil {
		j.Previous = prev.Uuid
	}
	j.Fill()
	j.SetValid(nil)
	return j
}

// startJob stores j, makes it m's current job and retires prev.
func (s *Jobs) startJob(ctx context.Context, m *backend.Machine, j, prev *backend.Job) error {
	data, err := encode(j)
	if err != nil {
		return err
	}
	if _, err := s.st.Create(ctx, "jobs", j.Uuid, data); err != nil {
		return err
	}
	emit(ctx, s.event(ctx, "create", j, nil))
	if prev != nil && prev.Current {
		rec, err := s.st.Get(ctx, "jobs", prev.Uuid)
		if err != nil {
			return err
		}
		old := clone(prev)
		prev.Current = false
		if err := s.writeJob(ctx, prev.Uuid, rec.Rev, old, prev); err != nil {
			return err
		}
	}
	m.CurrentJob = j.Uuid
	return nil
}

func (s *core) writeJob(ctx context.Context, key string, rev int64, old, j backend.Model) error {
	data, err := encode(j)
	if err != nil {
		return err
	}
	if _, err := s.st.Update(ctx, "jobs", key, rev, data); err != nil {
		return conflictRetry(err, "jobs", key)
	}
	emit(ctx, s.event(ctx, "update", j, old))
	return nil
}

// writeMachine stores a machine changed by job bookkeeping (no API
// validation or lock check: the agent and the job state machine own these
// fields). An unchanged machine is not rewritten, so polling for jobs does
// not wake every watcher.
func (s *core) writeMachine(ctx context.Context, key string, rev int64, old, m *backend.Machine) error {
	data, err := encode(m)
	if err != nil {
		return err
	}
	if before, err := encode(old); err == nil && string(before) == string(data) {
		return nil
	}
	if _, err := s.st.Update(ctx, "machines", key, rev, data); err != nil {
		return conflictRetry(err, "machines", key)
	}
	emit(ctx, s.event(ctx, "update", m, old))
	return nil
}

func conflictRetry(err error, prefix, key string) error {
	if backend.IsCode(err, backend.ECONFLICT) {
		return backend.NewError(backend.ECONFLICT, "Conflict", prefix, key, "Object changed concurrently; try again")
	}
	return err
}

// beforeWrite stamps job times on state changes made through the API.
func (s *Jobs) beforeWrite(_ backend.Operation, om, nm backend.Model, _ bool) error {
	old, j := om.(*backend.Job), nm.(*backend.Job)
	if old.State == j.State {
		return nil
	}
	switch j.State {
	case backend.JobRunning:
		if j.StartTime.IsZero() {
			j.StartTime = s.now()
		}
	case backend.JobFailed, backend.JobFinished, backend.JobIncomplete:
		if j.EndTime.IsZero() {
			j.EndTime = s.now()
		}
	}
	return nil
}

// afterWrite applies a job's state change to its machine (docs/design.md §10.2,
// §5.3): failed makes the machine not Runnable and moves a transitional
// PoolStatus to its Hold status; the current job of the last task finishing
// completes the workflow.
func (s *Jobs) afterWrite(ctx context.Context, om, nm backend.Model) error {
	old, j := om.(*backend.Job), nm.(*backend.Job)
	// Job bookkeeping is the server's own work, whoever changed the job
	// (docs/design.md §2.3).
	ctx = backend.WithSystem(ctx)
	if old.State != j.State && s.onChange != nil {
		// Inside the job's own transaction: what the hook records (the
		// jobfail delivery) commits or rolls back with the job itself.
		if err := s.onChange(ctx, old, j); err != nil {
			return err
		}
	}
	if old.State == j.State || (j.State != backend.JobFailed && j.State != backend.JobFinished) {
		return nil
	}
	rec, mm, err := s.stored(ctx, "machines", j.Machine)
	if err != nil || mm == nil {
		return err
	}
	m := mm.(*backend.Machine)
	orig := clone(m).(*backend.Machine)
	switch j.State {
	case backend.JobFailed:
		m.Runnable = false
		m.PoolStatus = backend.PoolStatusOnFailure(m.PoolStatus)
	case backend.JobFinished:
		if m.CurrentJob != j.Uuid || j.CurrentIndex != len(m.Tasks)-1 || m.WorkflowComplete {
			return nil
		}
		m.WorkflowComplete = true
		m.PoolStatus = backend.PoolStatusOnComplete(m.PoolStatus)
	}
	return s.writeMachine(ctx, rec.Key, rec.Rev, orig, m)
}

// AppendJobLog appends b to job uuid's log (PUT /jobs/<uuid>/log).
func (s *Jobs) AppendJobLog(ctx context.Context, id string, b []byte) error {
	if s.logs == nil {
		return backend.OpError(backend.EUNAVAILABLE, backend.ReplaceOp, "jobs", id, "Job logs are not available")
	}
	if _, err := s.readRecord(ctx, s.kinds.Kind("jobs"), id, backend.ReplaceOp); err != nil {
		return err
	}
	return s.logs.AppendJobLog(ctx, id, b)
}

// JobLog returns job uuid's log.
func (s *Jobs) JobLog(ctx context.Context, id string) ([]byte, error) {
	if s.logs == nil {
		return nil, backend.OpError(backend.EUNAVAILABLE, backend.ReadOp, "jobs", id, "Job logs are not available")
	}
	if _, err := s.readRecord(ctx, s.kinds.Kind("jobs"), id, backend.ReadOp); err != nil {
		return nil, err
	}
	return s.logs.JobLog(ctx, id)
}

// deleteLog removes a deleted job's log with it, when the log store can.
func (s *Jobs) deleteLog(ctx context.Context, id string) error {
	if jl, ok := s.logs.(interface {
		DeleteJobLog(ctx context.Context, uuid string) error
	}); ok {
		return jl.DeleteJobLog(ctx, id)
	}
	return nil
}
