package backend

// JobOutcome is what a job request (an agent asking for its machine's next
// job) gave the agent (docs/design.md §10.2).
type JobOutcome int

const (
	// JobNone: nothing to run now. The task list ended, or stage:,
	// bootenv: or context: entries changed what runs next.
	JobNone JobOutcome = iota
	// JobNew: a new job in state created, now the machine's CurrentJob.
	JobNew
	// JobAgain: the machine's incomplete current job, handed back (reset
	// to created) to run again.
	JobAgain
)
