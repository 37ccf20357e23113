package backend

import "sort"

// IndexType says how an index's values compare.
type IndexType string

const (
	IndexString IndexType = "string"
	IndexBool   IndexType = "boolean"
	IndexInt    IndexType = "integer"
	IndexUUID   IndexType = "UUID"
	IndexIP     IndexType = "IP"
	IndexList   IndexType = "list" // a JSON list of strings; Eq means "contains"
	IndexTime   IndexType = "dateTime"
	IndexMap    IndexType = "map" // Params: filterable only as param-value filters
)

// Index describes one filterable, sortable field of a kind. Field is the
// top-level JSON field of the object the index reads.
type Index struct {
	Field  string    `json:"-"`
	Type   IndexType `json:"Type"`
	Unique bool      `json:"Unique"`
	// Unordered indexes cannot be sorted or range-compared.
	Unordered bool `json:"Unordered"`
	Regex     bool `json:"Regex"`
}

// Kind describes a stored object type: its prefix, key, indexes and how to
// make an empty value. It is the one table the store, the gateway and the
// claims code all read.
type Kind struct {
	Prefix   string
	KeyField string // JSON field of the native key
	Indexes  map[string]Index
	// ParamFilters: list filters may name params (machines, profiles).
	ParamFilters bool
	// HasParams: the object has a Params map and params sub-resources.
	HasParams bool
	New       func() Model
}

// HasIndex reports whether name is an index of the kind.
func (k *Kind) HasIndex(name string) bool { _, ok := k.Indexes[name]; return ok }

// IndexNames returns the index names, sorted.
func (k *Kind) IndexNames() []string {
	out := make([]string, 0, len(k.Indexes))
	for n := range k.Indexes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func str(field string, unique bool) Index {
	return Index{Field: field, Type: IndexString, Unique: unique, Regex: true}
}
func boolean(field string) Index { return Index{Field: field, Type: IndexBool} }
func integer(field string) Index { return Index{Field: field, Type: IndexInt} }
func list(field string) Index {
	return Index{Field: field, Type: IndexList, Unordered: true, Regex: true}
}

// documented is baseIndexes of a kind keyed by Name that carries
// Description and Documentation, as most of DRP's content kinds do.
func documented(extra map[string]Index) map[string]Index {
	m := map[string]Index{
		"Name": str("Name", true), "Description": str("Description", false), "Documentation": str("Documentation", false),
	}
	for n, i := range extra {
		m[n] = i
	}
	return baseIndexes("Name", m)
}

func baseIndexes(keyField string, extra map[string]Index) map[string]Index {
	m := map[string]Index{
		"Available": boolean("Available"),
		"Valid":     boolean("Validated"),
		"ReadOnly":  boolean("ReadOnly"),
		"Bundle":    str("Bundle", false),
		"Endpoint":  str("Endpoint", false),
		"Key":       str(keyField, true),
	}
	for n, i := range extra {
		m[n] = i
	}
	return m
}

// Prefixes of the stored kinds: each names the kind's table, its routes
// (/api/v3/<prefix>) and the scope of its claims. They are untyped string
// constants, so that code naming a kind cannot misspell it while the
// services keep taking prefixes as strings (docs/design.md §1.4).
const (
	PrefixUsers        = "users"
	PrefixRoles        = "roles"
	PrefixTenants      = "tenants"
	PrefixMachines     = "machines"
	PrefixProfiles     = "profiles"
	PrefixParams       = "params"
	PrefixBootenvs     = "bootenvs"
	PrefixWorkflows    = "workflows"
	PrefixStages       = "stages"
	PrefixTasks        = "tasks"
	PrefixJobs         = "jobs"
	PrefixPools        = "pools"
	PrefixPlugins      = "plugins"
	PrefixReservations = "reservations"
)

// kindTable returns every stored object type, keyed by prefix; see
// Catalog.
func kindTable() map[string]*Kind {
	kinds := map[string]*Kind{}
	register := func(k *Kind) { kinds[k.Prefix] = k }
	register(&Kind{Prefix: PrefixUsers, KeyField: "Name", New: func() Model { return &User{} },
		Indexes: baseIndexes("Name", map[string]Index{
			"Name": str("Name", true), "Roles": list("Roles"), "Description": str("Description", false),
		})})
	register(&Kind{Prefix: PrefixRoles, KeyField: "Name", New: func() Model { return &Role{} },
		Indexes: documented(nil)})
	register(&Kind{Prefix: PrefixTenants, KeyField: "Name", New: func() Model { return &Tenant{} },
		Indexes: documented(map[string]Index{"Users": list("Users")})})
	register(&Kind{Prefix: PrefixMachines, KeyField: "Uuid", New: func() Model { return &Machine{} },
		ParamFilters: true, HasParams: true,
		Indexes: baseIndexes("Uuid", map[string]Index{
			"Uuid":             {Field: "Uuid", Type: IndexUUID, Unique: true},
			"Name":             str("Name", true),
			"Address":          {Field: "Address", Type: IndexIP},
			"Arch":             str("Arch", false),
			"BootEnv":          str("BootEnv", false),
			"Context":          str("Context", false),
			"CurrentJob":       {Field: "CurrentJob", Type: IndexUUID},
			"CurrentTask":      integer("CurrentTask"),
			"Description":      str("Description", false),
			"HardwareAddrs":    list("HardwareAddrs"),
			"HardwareAddr":     list("HardwareAddrs"),
			"Locked":           boolean("Locked"),
			"OS":               str("OS", false),
			"Pool":             str("Pool", false),
			"PoolAllocated":    boolean("PoolAllocated"),
			"PoolStatus":       str("PoolStatus", false),
			"Profiles":         list("Profiles"),
			"Runnable":         boolean("Runnable"),
			"Stage":            str("Stage", false),
			"Tasks":            list("Tasks"),
			"Workflow":         str("Workflow", false),
			"WorkflowComplete": boolean("WorkflowComplete"),
		})})
	register(&Kind{Prefix: PrefixProfiles, KeyField: "Name", New: func() Model { return &Profile{} },
		ParamFilters: true, HasParams: true,
		Indexes: documented(map[string]Index{"Profiles": list("Profiles")})})
	register(&Kind{Prefix: PrefixParams, KeyField: "Name", New: func() Model { return &Param{} },
		Indexes: documented(map[string]Index{"Secure": boolean("Secure")})})
	register(&Kind{Prefix: PrefixBootenvs, KeyField: "Name", New: func() Model { return &BootEnv{} },
		Indexes: documented(map[string]Index{"OnlyUnknown": boolean("OnlyUnknown")})})
	register(&Kind{Prefix: PrefixWorkflows, KeyField: "Name", New: func() Model { return &Workflow{} },
		Indexes: documented(map[string]Index{"Stages": list("Stages")})})
	register(&Kind{Prefix: PrefixStages, KeyField: "Name", New: func() Model { return &Stage{} },
		HasParams: true,
		Indexes:   documented(map[string]Index{"BootEnv": str("BootEnv", false), "Reboot": boolean("Reboot"), "Tasks": list("Tasks"), "Profiles": list("Profiles")})})
	register(&Kind{Prefix: PrefixTasks, KeyField: "Name", New: func() Model { return &Task{} },
		Indexes: documented(nil)})
	register(&Kind{Prefix: PrefixJobs, KeyField: "Uuid", New: func() Model { return &Job{} },
		Indexes: baseIndexes("Uuid", map[string]Index{
			"Uuid":      {Field: "Uuid", Type: IndexUUID, Unique: true},
			"Machine":   {Field: "Machine", Type: IndexUUID},
			"Previous":  {Field: "Previous", Type: IndexUUID},
			"State":     str("State", false),
			"ExitState": str("ExitState", false),
			"Task":      str("Task", false),
			"Stage":     str("Stage", false),
			"Workflow":  str("Workflow", false),
			"BootEnv":   str("BootEnv", false),
			"Context":   str("Context", false),
			"Archived":  boolean("Archived"),
			"Current":   boolean("Current"),
			"StartTime": {Field: "StartTime", Type: IndexTime},
			"EndTime":   {Field: "EndTime", Type: IndexTime},
		})})
	register(&Kind{Prefix: PrefixPools, KeyField: "Id", New: func() Model { return &Pool{} },
		Indexes: baseIndexes("Id", map[string]Index{
			"Id": str("Id", true), "ParentPool": str("ParentPool", false),
			"Description": str("Description", false), "Documentation": str("Documentation", false),
		})})
	register(&Kind{Prefix: PrefixPlugins, KeyField: "Name", New: func() Model { return &Plugin{} },
		HasParams: true,
		Indexes: baseIndexes("Name", map[string]Index{
			"Name": str("Name", true), "Provider": str("Provider", false), "Description": str("Description", false),
		})})
	register(&Kind{Prefix: PrefixReservations, KeyField: "Addr", New: func() Model { return &Reservation{} },
		Indexes: baseIndexes("Addr", map[string]Index{
			"Addr": {Field: "Addr", Type: IndexIP, Unique: true}, "Token": str("Token", false),
			"Strategy": str("Strategy", false), "Description": str("Description", false),
		})})
	return kinds
}
