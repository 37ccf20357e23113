package backend

//go:generate go run ./internal/modelgen models.go models_gen.go

import (
	"encoding/json"
	"time"
)

// Envelope is the set of fields every DRP object carries (docs/design.md §4.1).
// Validated, Available and Errors are computed by the server; clients' values
// are advisory and overwritten.
type Envelope struct {
	Validated bool              `json:"Validated"`
	Available bool              `json:"Available"`
	Errors    []string          `json:"Errors"`
	ReadOnly  bool              `json:"ReadOnly"`
	Meta      map[string]string `json:"Meta"`
	Endpoint  string            `json:"Endpoint"`
	Bundle    string            `json:"Bundle"`
}

// Env returns the envelope itself, so every model embedding it satisfies Model.
func (e *Envelope) Env() *Envelope { return e }

// FillEnvelope turns nil lists and maps into empty ones, as DRP's Fill does.
func (e *Envelope) FillEnvelope() {
	emptySlice(&e.Errors)
	emptyMap(&e.Meta)
}

// emptySlice makes a nil list an empty one, which JSON shows as [] rather
// than null: what Fill does to each list field of a kind (models_gen.go).
func emptySlice[E any](s *[]E) {
	if *s == nil {
		*s = []E{}
	}
}

// emptyMap is emptySlice for a map field: {} rather than null.
func emptyMap[K comparable, V any](m *map[K]V) {
	if *m == nil {
		*m = map[K]V{}
	}
}

// SetValid records the outcome of validation: problems that only make the
// object unavailable (missing references) go in Errors; the object stays saved.
func (e *Envelope) SetValid(errs []string) {
	e.Validated = true
	e.Errors = append([]string{}, errs...)
	e.Available = len(errs) == 0
}

// Model is what every stored object type implements. Each kind's struct
// below names its prefix and key field in a //provgate:model line, from
// which go generate writes these methods (models_gen.go,
// backend/internal/modelgen).
type Model interface {
	Prefix() string // the plural API prefix: "machines"
	Key() string    // the native key value
	SetKey(string)  // sets the native key (create by name, Uuid assignment)
	Env() *Envelope
	Fill() // nil lists and maps to empty ones
}

// Claim is one grant: Scope, Action, Specific (docs/design.md §5.1; JSON keys are
// lower-case on the wire).
type Claim struct {
	Scope    string `json:"scope"`
	Action   string `json:"action"`
	Specific string `json:"specific"`
}

func (c Claim) String() string { return c.Scope + " " + c.Action + " " + c.Specific }

// User is a person or automation that logs in.
//
//provgate:model users Name
type User struct {
	Envelope
	Name         string   `json:"Name"`
	Description  string   `json:"Description"`
	Roles        []string `json:"Roles"`
	PasswordHash []byte   `json:"PasswordHash,omitempty"` // never returned; may be given on create
	Secret       string   `json:"Secret,omitempty"`       // never returned
}

func (u *User) Sanitize() { u.PasswordHash = nil; u.Secret = "" }

// Role is a named set of claims.
//
//provgate:model roles Name
type Role struct {
	Envelope
	Name          string  `json:"Name"`
	Description   string  `json:"Description"`
	Documentation string  `json:"Documentation"`
	Claims        []Claim `json:"Claims"`
}

// Tenant restricts the visibility of objects for its users.
//
//provgate:model tenants Name
type Tenant struct {
	Envelope
	Name          string              `json:"Name"`
	Description   string              `json:"Description"`
	Documentation string              `json:"Documentation"`
	Members       map[string][]string `json:"Members"`
	Users         []string            `json:"Users"`
}

// Fingerprint identifies a machine's hardware.
type Fingerprint struct {
	SSNHash         []byte   `json:"SSNHash"`
	CSNHash         []byte   `json:"CSNHash"`
	CloudInstanceID string   `json:"CloudInstanceID"`
	SystemUUID      string   `json:"SystemUUID"`
	MemoryIds       []string `json:"MemoryIds"`
}

// Machine is a bare-metal (or virtual) machine under management.
//
//provgate:model machines Uuid
type Machine struct {
	Envelope
	Partial          bool           `json:"Partial"`
	Name             string         `json:"Name"`
	Description      string         `json:"Description"`
	Uuid             string         `json:"Uuid"`
	CurrentJob       string         `json:"CurrentJob"`
	Address          string         `json:"Address"`
	Stage            string         `json:"Stage"`
	BootEnv          string         `json:"BootEnv"`
	Profiles         []string       `json:"Profiles"`
	Params           map[string]any `json:"Params"`
	Tasks            []string       `json:"Tasks"`
	CurrentTask      int            `json:"CurrentTask"`
	RetryTaskAttempt int            `json:"RetryTaskAttempt"`
	TaskErrorStacks  []any          `json:"TaskErrorStacks"`
	Runnable         bool           `json:"Runnable"`
	Secret           string         `json:"Secret,omitempty"` // never returned
	OS               string         `json:"OS"`
	HardwareAddrs    []string       `json:"HardwareAddrs"`
	Workflow         string         `json:"Workflow"`
	Arch             string         `json:"Arch"`
	Locked           bool           `json:"Locked"`
	Context          string         `json:"Context"`
	Fingerprint      Fingerprint    `json:"Fingerprint"`
	Pool             string         `json:"Pool"`
	PoolAllocated    bool           `json:"PoolAllocated"`
	PoolStatus       string         `json:"PoolStatus"`
	WorkflowComplete bool           `json:"WorkflowComplete"`
}

// fillDefaults gives a machine DRP's defaults (Fill, models_gen.go).
func (m *Machine) fillDefaults() {
	emptySlice(&m.Fingerprint.MemoryIds)
	if m.Arch == "" {
		m.Arch = "amd64"
	}
	if m.Pool == "" {
		m.Pool = DefaultPool
	}
	if m.PoolStatus == "" {
		m.PoolStatus = PoolFree
	}
	if m.Stage == "" {
		m.Stage = NoStage
	}
	if m.Meta["feature-flags"] == "" {
		m.Meta["feature-flags"] = "change-stage-v2"
	}
}
func (m *Machine) Sanitize() { m.Secret = "" }

// NoStage is DRP's name for a machine's stage when it has none
// (docs/design.md §10.1): an empty Stage reads as it.
const NoStage = "none"

// DefaultPool is the root pool every machine starts in.
const DefaultPool = "default"

// PoolStatus values (docs/design.md §11.5).
const (
	PoolJoining     = "Joining"
	PoolHoldJoin    = "HoldJoin"
	PoolFree        = "Free"
	PoolBuilding    = "Building"
	PoolHoldBuild   = "HoldBuild"
	PoolInUse       = "InUse"
	PoolDestroying  = "Destroying"
	PoolHoldDestroy = "HoldDestroy"
	PoolLeaving     = "Leaving"
	PoolHoldLeave   = "HoldLeave"
)

// PoolStatuses lists every valid PoolStatus.
var PoolStatuses = []string{PoolJoining, PoolHoldJoin, PoolFree, PoolBuilding, PoolHoldBuild,
	PoolInUse, PoolDestroying, PoolHoldDestroy, PoolLeaving, PoolHoldLeave}

// Profile is a named, reusable set of params.
//
//provgate:model profiles Name
type Profile struct {
	Envelope
	Partial       bool           `json:"Partial"`
	Name          string         `json:"Name"`
	Description   string         `json:"Description"`
	Documentation string         `json:"Documentation"`
	Params        map[string]any `json:"Params"`
	Profiles      []string       `json:"Profiles"`
}

// Param defines a parameter: its JSON schema and whether it is Secure.
//
//provgate:model params Name
type Param struct {
	Envelope
	Name          string `json:"Name"`
	Description   string `json:"Description"`
	Documentation string `json:"Documentation"`
	Secure        bool   `json:"Secure"`
	Schema        any    `json:"Schema"`
}

// TemplateInfo is one template of a task, stage or bootenv.
type TemplateInfo struct {
	Name     string            `json:"Name"`
	Path     string            `json:"Path"`
	Link     string            `json:"Link"`
	ID       string            `json:"ID"`
	Contents string            `json:"Contents"`
	Meta     map[string]string `json:"Meta"`
}

// BootEnv describes how a machine boots. Kernel, Initrds and BootParams
// name what a network boot loads; a bootenv with a Kernel net-boots.
//
//provgate:model bootenvs Name
type BootEnv struct {
	Envelope
	Name           string         `json:"Name"`
	Description    string         `json:"Description"`
	Documentation  string         `json:"Documentation"`
	OS             map[string]any `json:"OS"`
	Templates      []TemplateInfo `json:"Templates"`
	Kernel         string         `json:"Kernel"`
	Initrds        []string       `json:"Initrds"`
	BootParams     string         `json:"BootParams"`
	RequiredParams []string       `json:"RequiredParams"`
	OptionalParams []string       `json:"OptionalParams"`
	OnlyUnknown    bool           `json:"OnlyUnknown"`
	// Loaders maps a machine arch to the boot loader it uses; stored as
	// given, always an object.
	Loaders map[string]string `json:"Loaders"`
}

// fillDefaults gives OS DRP's OsInfo members, blank when unset, so an
// object read and sent back as DRP's model has it (drpcli -r/--ref tests
// the whole document against such a copy). Other members are kept.
func (b *BootEnv) fillDefaults() {
	for _, f := range []string{"Name", "Family", "Codename", "Version", "IsoFile", "IsoSha256", "IsoUrl"} {
		if b.OS[f] == nil {
			b.OS[f] = ""
		}
	}
	if b.OS["SupportedArchitectures"] == nil {
		b.OS["SupportedArchitectures"] = map[string]any{}
	}
}

// Workflow is an ordered list of stages.
//
//provgate:model workflows Name
type Workflow struct {
	Envelope
	Name          string   `json:"Name"`
	Description   string   `json:"Description"`
	Documentation string   `json:"Documentation"`
	Stages        []string `json:"Stages"`
}

// Stage is a step of a workflow: tasks, params and an optional bootenv.
//
//provgate:model stages Name
type Stage struct {
	Envelope
	Partial        bool           `json:"Partial"`
	Name           string         `json:"Name"`
	Description    string         `json:"Description"`
	Documentation  string         `json:"Documentation"`
	Templates      []TemplateInfo `json:"Templates"`
	RequiredParams []string       `json:"RequiredParams"`
	OptionalParams []string       `json:"OptionalParams"`
	Params         map[string]any `json:"Params"`
	BootEnv        string         `json:"BootEnv"`
	Tasks          []string       `json:"Tasks"`
	Profiles       []string       `json:"Profiles"`
	Reboot         bool           `json:"Reboot"`
	RunnerWait     bool           `json:"RunnerWait"`
}

// Task is a unit of work run by a machine's agent.
//
//provgate:model tasks Name
type Task struct {
	Envelope
	Name           string         `json:"Name"`
	Description    string         `json:"Description"`
	Documentation  string         `json:"Documentation"`
	Templates      []TemplateInfo `json:"Templates"`
	RequiredParams []string       `json:"RequiredParams"`
	OptionalParams []string       `json:"OptionalParams"`
	Prerequisites  []string       `json:"Prerequisites"`
	ExtraRoles     []string       `json:"ExtraRoles,omitempty"`
	ExtraClaims    []Claim        `json:"ExtraClaims,omitempty"`
}

// Job states and exit states (docs/design.md §10.3).
const (
	JobCreated    = "created"
	JobRunning    = "running"
	JobFailed     = "failed"
	JobFinished   = "finished"
	JobIncomplete = "incomplete"
)

// Job is one run of one task on one machine.
//
//provgate:model jobs Uuid
type Job struct {
	Envelope
	Uuid         string    `json:"Uuid"`
	Previous     string    `json:"Previous"`
	Machine      string    `json:"Machine"`
	Task         string    `json:"Task"`
	Stage        string    `json:"Stage"`
	Context      string    `json:"Context"`
	State        string    `json:"State"`
	ExitState    string    `json:"ExitState"`
	StartTime    time.Time `json:"StartTime"`
	EndTime      time.Time `json:"EndTime"`
	Archived     bool      `json:"Archived"`
	Current      bool      `json:"Current"`
	CurrentIndex int       `json:"CurrentIndex"`
	NextIndex    int       `json:"NextIndex"`
	Workflow     string    `json:"Workflow"`
	BootEnv      string    `json:"BootEnv"`
	ExtraClaims  []Claim   `json:"ExtraClaims,omitempty"`
	Token        string    `json:"Token,omitempty"`
}

// PoolTransitionActions is an action group applied on a pool transition.
type PoolTransitionActions struct {
	Workflow         string         `json:"Workflow,omitempty"`
	AddProfiles      []string       `json:"AddProfiles,omitempty"`
	AddParameters    map[string]any `json:"AddParameters,omitempty"`
	RemoveProfiles   []string       `json:"RemoveProfiles,omitempty"`
	RemoveParameters []string       `json:"RemoveParameters,omitempty"`
}

// PoolAutoFill is stored and returned, never acted on (docs/design.md §11).
type PoolAutoFill struct {
	UseAutoFill      bool           `json:"UseAutoFill"`
	MinFree          int            `json:"MinFree"`
	MaxFree          int            `json:"MaxFree"`
	CreateParameters map[string]any `json:"CreateParameters,omitempty"`
	AcquirePool      string         `json:"AcquirePool,omitempty"`
	ReturnPool       string         `json:"ReturnPool,omitempty"`
}

// Pool groups machines and carries the action groups of its transitions.
//
//provgate:model pools Id
type Pool struct {
	Envelope
	Id              string                 `json:"Id"`
	Description     string                 `json:"Description,omitempty"`
	Documentation   string                 `json:"Documentation,omitempty"`
	ParentPool      string                 `json:"ParentPool,omitempty"`
	EnterActions    *PoolTransitionActions `json:"EnterActions,omitempty"`
	ExitActions     *PoolTransitionActions `json:"ExitActions,omitempty"`
	AllocateActions *PoolTransitionActions `json:"AllocateActions,omitempty"`
	ReleaseActions  *PoolTransitionActions `json:"ReleaseActions,omitempty"`
	AutoFill        *PoolAutoFill          `json:"AutoFill,omitempty"`
}

// PoolResult is one machine in a pool operation's reply.
type PoolResult struct {
	Name      string `json:"Name"`
	Uuid      string `json:"Uuid"`
	Allocated bool   `json:"Allocated"`
	Status    string `json:"Status"`
}

// Plugin is a configured instance of a plugin provider.
//
//provgate:model plugins Name
type Plugin struct {
	Envelope
	Partial       bool           `json:"Partial"`
	Name          string         `json:"Name"`
	Description   string         `json:"Description"`
	Documentation string         `json:"Documentation"`
	Params        map[string]any `json:"Params"`
	Provider      string         `json:"Provider"`
	PluginErrors  []string       `json:"PluginErrors"`
}

// AvailableAction is an action a plugin provider offers on a model.
type AvailableAction struct {
	Provider       string   `json:"Provider"`
	Model          string   `json:"Model"`
	Command        string   `json:"Command"`
	RequiredParams []string `json:"RequiredParams"`
	OptionalParams []string `json:"OptionalParams"`
}

// PluginProvider is built into the server; read-only through the API.
type PluginProvider struct {
	Meta             map[string]string `json:"Meta"`
	Name             string            `json:"Name"`
	Version          string            `json:"Version"`
	PluginVersion    int               `json:"PluginVersion"`
	AutoStart        bool              `json:"AutoStart"`
	HasPublish       bool              `json:"HasPublish"`
	AvailableActions []AvailableAction `json:"AvailableActions"`
	RequiredParams   []string          `json:"RequiredParams"`
	OptionalParams   []string          `json:"OptionalParams"`
	StoreObjects     map[string]any    `json:"StoreObjects"`
	Documentation    string            `json:"Documentation"`
	Content          string            `json:"Content"`
}

// Reservation pins an address to a machine's hardware address.
//
//provgate:model reservations Addr
type Reservation struct {
	Envelope
	Addr        string `json:"Addr"`
	Token       string `json:"Token"`
	Strategy    string `json:"Strategy"`
	Description string `json:"Description"`
	Scoped      bool   `json:"Scoped"`
	Subnet      string `json:"Subnet"`
	NextServer  string `json:"NextServer"`
	Duration    int    `json:"Duration"`
	Options     []any  `json:"Options"`
}

// fillDefaults: a reservation's Strategy is MAC unless set.
func (r *Reservation) fillDefaults() {
	if r.Strategy == "" {
		r.Strategy = "MAC"
	}
}

// Event is published on the internal bus and streamed to subscribers.
type Event struct {
	Time      time.Time       `json:"Time"`
	Type      string          `json:"Type"`
	Action    string          `json:"Action"`
	Key       string          `json:"Key"`
	Principal string          `json:"Principal"`
	Object    json.RawMessage `json:"Object"`
	Original  json.RawMessage `json:"Original"`

	// posted marks an event a client sent (POST /events). Only AsPosted
	// sets it (the event bus, on PublishPosted), and nothing clears it, so
	// a request body cannot forge or drop the mark; it is never
	// serialized.
	posted bool
	// owner is the machine of a job event whose Object is absent (a delete
	// relayed from another replica); see Owner.
	owner string
}

// Owner is the machine a jobs event belongs to, read from the job in
// Object (jobs follow their machine, docs/design.md §6.3); "" for other
// types or when unknown.
func (e Event) Owner() string {
	if e.Type != "jobs" {
		return ""
	}
	if e.owner != "" {
		return e.owner
	}
	var j struct {
		Machine string `json:"Machine"`
	}
	if len(e.Object) > 0 && json.Unmarshal(e.Object, &j) == nil && j.Machine != "" {
		return j.Machine
	}
	if len(e.Original) > 0 && json.Unmarshal(e.Original, &j) == nil {
		return j.Machine
	}
	return ""
}

// Posted reports whether a client posted the event: it is a notification
// for event streams, never a fact the server acts on.
func (e Event) Posted() bool { return e.posted }

// AsPosted returns e marked as an event a client posted. The mark only
// narrows who receives it; there is no way to clear it.
func (e Event) AsPosted() Event { e.posted = true; return e }

// WithOwner returns e with its owner machine set, for a job event whose
// Object is absent (a delete relayed from another replica) or whose owner
// was read once already; see Owner.
func (e Event) WithOwner(machine string) Event { e.owner = machine; return e }

// Pref is one preference (GET/POST /api/v3/prefs is a map of these).
type Pref struct {
	Name  string `json:"Name"`
	Value string `json:"Value"`
}

// Sanitize strips from m what must never leave the server (a user's
// password hash and Secret, a machine's Secret) and returns m.
func Sanitize(m Model) Model {
	switch v := m.(type) {
	case *User:
		v.Sanitize()
	case *Machine:
		v.Sanitize()
	}
	return m
}

// LicenseState is the license as the server holds it, as /api/v3/info and
// /api/v3/license report it (docs/design.md §7).
type LicenseState struct {
	Valid    bool     `json:"Valid"`
	Owner    string   `json:"Owner"`
	Features []string `json:"Features"`
	Expires  string   `json:"Expires"`
	Error    string   `json:"Error"`
}

// JobAction is one rendered template of a job, as the agent runs it
// (GET /jobs/<id>/actions; docs/design.md §10.4).
type JobAction struct {
	Name    string            `json:"Name"`
	Path    string            `json:"Path"`
	Content string            `json:"Content"`
	Meta    map[string]string `json:"Meta"`
}
