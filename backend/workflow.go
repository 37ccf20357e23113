package backend

// BuildTaskList expands a workflow into a machine's task list the way DRP
// does (docs/design.md §10.1): each stage becomes "stage:<name>", then
// "bootenv:<bootenv>" when the stage has one, then the stage's tasks.
// stage returns nil for a stage that does not exist (it is skipped).
func BuildTaskList(wf *Workflow, stage func(name string) *Stage) []string {
	tasks := []string{}
	for _, name := range wf.Stages {
		st := stage(name)
		if st == nil {
			continue
		}
		tasks = append(tasks, "stage:"+name)
		if st.BootEnv != "" {
			tasks = append(tasks, "bootenv:"+st.BootEnv)
		}
		tasks = append(tasks, st.Tasks...)
	}
	return tasks
}

// SetWorkflow points m at wf with a fresh task list: CurrentTask -1,
// WorkflowComplete false (true at once when the list is empty). The Stage
// stays until the list's first "stage:" entry is rolled over. A nil wf
// removes the workflow as DRP does: Stage "none", no tasks, complete.
func SetWorkflow(m *Machine, wf *Workflow, stage func(name string) *Stage) {
	if wf == nil {
		m.Workflow = ""
		m.Stage = NoStage
		m.Tasks = []string{}
		m.CurrentTask = -1
		m.WorkflowComplete = true
		return
	}
	m.Workflow = wf.Name
	m.Tasks = BuildTaskList(wf, stage)
	m.CurrentTask = -1
	m.WorkflowComplete = len(m.Tasks) == 0
}
