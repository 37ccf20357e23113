package callback

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/provgate/provgate/backend"
)

// Objects is what the callback plugin reads of the stored objects; the
// object service's object part implements it.
type Objects interface {
	Get(ctx context.Context, prefix, key string) (backend.Model, int64, error)
	List(ctx context.Context, prefix string, q backend.Query) ([]backend.Model, int, int, error)
}

// Params is what the callback plugin reads of objects' params; the object
// service's params part implements it.
type Params interface {
	// Params returns an object's params; Secure values decrypted only when
	// decode is true.
	Params(ctx context.Context, prefix, key string, aggregate, decode bool) (map[string]json.RawMessage, error)
	// Aggregate returns a machine's effective params (docs/design.md §4).
	Aggregate(ctx context.Context, m *backend.Machine, decode bool) (map[string]json.RawMessage, error)
}

// Viewer is the read cache of the object service (docs/design.md §14.6):
// an Objects that also implements it is read through it, so that a
// callbackDo finds an unchanged machine and plugin without reading the
// store. The View's Model is shared and never modified.
type Viewer interface {
	View(ctx context.Context, prefix, key string) (backend.View, error)
}

// objectSource reads machines and plugins through Objects and Params
// (Machines and Plugins of a Service built with them).
type objectSource struct {
	o Objects
	p Params
	// opened caches plugins' params in the clear by name and revision
	// (revisions are never reused), so that an unchanged plugin is not
	// read again to open its Secure params; nil: no cache.
	opened *openedCache
}

type openedCache struct {
	mu sync.Mutex
	m  map[string]openedParams
}

type openedParams struct {
	rev    int64
	params map[string]any
}

// get reads prefix/key through the read cache when there is one; the
// model returned is the caller's own (a shallow copy of the cached one).
func (s objectSource) get(ctx context.Context, prefix, key string) (backend.Model, int64, error) {
	v, ok := s.o.(Viewer)
	if !ok {
		return s.o.Get(ctx, prefix, key)
	}
	view, err := v.View(ctx, prefix, key)
	if err != nil {
		return nil, 0, err
	}
	switch m := view.Model.(type) {
	case *backend.Machine:
		c := *m
		return &c, view.Rev, nil
	case *backend.Plugin:
		c := *m
		return &c, view.Rev, nil
	}
	return view.Model, view.Rev, nil
}

func (s objectSource) GetMachine(ctx context.Context, uuid string) (*backend.Machine, error) {
	m, _, err := s.get(ctx, backend.PrefixMachines, uuid)
	if err != nil {
		return nil, err
	}
	return m.(*backend.Machine), nil
}

func (s objectSource) MachineParams(ctx context.Context, m *backend.Machine, aggregate, decode bool) (map[string]any, error) {
	var raw map[string]json.RawMessage
	var err error
	switch {
	case aggregate:
		raw, err = s.p.Aggregate(ctx, m, decode)
	case !decode:
		// The machine as read holds its own params as stored (Secure
		// ones sealed): what reading them again would return.
		out := make(map[string]any, len(m.Params))
		for k, v := range m.Params {
			out[k] = v
		}
		return out, nil
	default:
		raw, err = s.p.Params(ctx, backend.PrefixMachines, m.Uuid, false, decode)
	}
	if err != nil {
		return nil, err
	}
	return backend.DecodeParams(raw)
}

// ListPlugins returns every plugin, callback plugins with their params in
// the clear (see openParams).
func (s objectSource) ListPlugins(ctx context.Context) ([]*backend.Plugin, error) {
	list, _, _, err := s.o.List(ctx, backend.PrefixPlugins, backend.Query{Limit: -1})
	if err != nil {
		return nil, err
	}
	out := make([]*backend.Plugin, 0, len(list))
	for _, m := range list {
		p, ok := m.(*backend.Plugin)
		if !ok {
			return nil, fmt.Errorf("plugins: unexpected %T", m)
		}
		if p.Provider == ProviderName {
			if err := s.openParams(ctx, p); err != nil {
				return nil, err
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// openParams gives the service a plugin's params in the clear: callback/auths
// is a Secure param, stored sealed, and the service must see what the
// validation at save time saw.
func (s objectSource) openParams(ctx context.Context, p *backend.Plugin) error {
	_, err := s.openParamsAt(ctx, p, 0)
	return err
}

// openParamsAt is openParams for p read at revision rev (0: unknown, not
// cached). The map set as p.Params is shared with the cache and never
// modified.
func (s objectSource) openParamsAt(ctx context.Context, p *backend.Plugin, rev int64) (map[string]any, error) {
	if s.opened != nil && rev > 0 {
		s.opened.mu.Lock()
		o, ok := s.opened.m[p.Name]
		s.opened.mu.Unlock()
		if ok && o.rev == rev {
			p.Params = o.params
			return o.params, nil
		}
	}
	raw, err := s.p.Params(ctx, backend.PrefixPlugins, p.Name, false, true)
	if err != nil {
		return nil, err
	}
	params, err := backend.DecodeParams(raw)
	if err != nil {
		return nil, err
	}
	p.Params = params
	if s.opened != nil && rev > 0 {
		s.opened.mu.Lock()
		// Params read after the revision was: never older than it, and a
		// newer revision is cached under its own number next time.
		s.opened.m[p.Name] = openedParams{rev: rev, params: params}
		s.opened.mu.Unlock()
	}
	return params, nil
}

// callbackPlugins lists the plugins of this provider.
func (s objectSource) callbackPlugins(ctx context.Context) ([]*backend.Plugin, error) {
	all, err := s.ListPlugins(ctx)
	if err != nil {
		return nil, err
	}
	out := []*backend.Plugin{}
	for _, p := range all {
		if p.Provider == ProviderName {
			out = append(out, p)
		}
	}
	return out, nil
}

// Actions are the plugin actions of the callback provider on machines
// (docs/design.md §12.2): which are offered, running callbackDo, and the
// recorded attempts.
type Actions struct {
	s   *Service
	src objectSource
}

// Actions returns the plugin actions of s; s must have been built with
// Options.Objects and Options.Params.
func (s *Service) Actions() *Actions {
	return &Actions{s: s, src: objectSource{o: s.opts.Objects, p: s.opts.Params,
		opened: s.opened}}
}

// Providers lists the plugin providers the server has.
func (a *Actions) Providers() []backend.PluginProvider {
	return []backend.PluginProvider{Provider()}
}

// List returns the actions plugins offer on an object (one per plugin
// instance; Provider is the provider name, as DRP reports it). A non-empty
// plugin keeps only that plugin's.
func (a *Actions) List(ctx context.Context, prefix, key, plugin string) ([]backend.AvailableAction, error) {
	if _, _, err := a.src.o.Get(ctx, prefix, key); err != nil {
		return nil, err
	}
	out := []backend.AvailableAction{}
	if prefix != backend.PrefixMachines {
		return out, nil
	}
	ps, err := a.src.callbackPlugins(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range ps {
		if plugin != "" && p.Name != plugin {
			continue
		}
		out = append(out, Provider().AvailableActions...)
	}
	return out, nil
}

// Run runs action cmd on an object: callbackDo on a machine, with the named
// plugin or the first callback plugin.
func (a *Actions) Run(ctx context.Context, prefix, key, cmd, plugin string, args map[string]json.RawMessage) (json.RawMessage, error) {
	m, _, err := a.src.get(ctx, prefix, key)
	if err != nil {
		return nil, err
	}
	params, err := backend.DecodeParams(args)
	if err != nil {
		return nil, backend.NewError(backend.EBADREQUEST, "INVOKE", prefix, key, "action parameters: "+err.Error())
	}
	if prefix != backend.PrefixMachines || cmd != ActionName {
		return nil, backend.NewError(backend.EBADREQUEST, "INVOKE", prefix, key, "Action "+cmd+" on "+prefix+": Not Found")
	}
	mc := m.(*backend.Machine)
	var p *backend.Plugin
	if plugin != "" {
		pm, rev, err := a.src.get(ctx, backend.PrefixPlugins, plugin)
		if err != nil || pm.(*backend.Plugin).Provider != ProviderName {
			return nil, backend.NewError(backend.EBADREQUEST, "INVOKE", prefix, key,
				"Action "+cmd+" on machines for plugin "+plugin+" not found")
		}
		p = pm.(*backend.Plugin)
		if _, err := a.src.openParamsAt(ctx, p, rev); err != nil {
			return nil, err
		}
	} else {
		ps, err := a.src.callbackPlugins(ctx)
		if err != nil {
			return nil, err
		}
		if len(ps) == 0 {
			return nil, backend.NewError(backend.EBADREQUEST, "INVOKE", prefix, key, "Action "+cmd+" on machines: Not Found")
		}
		p = ps[0]
	}
	if !p.Available {
		return nil, backend.NewError(backend.ECONFLICT, "INVOKE", backend.PrefixPlugins, p.Name,
			append([]string{"plugin " + p.Name + " is not available"}, p.Errors...)...)
	}
	// Action params missing from the body come from the machine's
	// aggregated params, as DRP fills declared action params.
	raw, err := a.src.p.Aggregate(ctx, mc, false)
	if err != nil {
		return nil, err
	}
	agg, err := backend.DecodeParams(raw)
	if err != nil {
		return nil, err
	}
	for _, name := range []string{ParamAction, ParamDataOverride} {
		if _, ok := params[name]; !ok {
			if v, ok := agg[name]; ok {
				params[name] = v
			}
		}
	}
	return a.s.Do(ctx, p, mc, params, backend.SourceAction)
}

// Attempts lists a plugin's recorded attempts (see Service.Attempts).
func (a *Actions) Attempts(ctx context.Context, plugin, machine string, limit int) ([]backend.CallbackAttempt, error) {
	if _, _, err := a.src.o.Get(ctx, backend.PrefixPlugins, plugin); err != nil {
		return nil, err
	}
	return a.s.Attempts(ctx, plugin, machine, limit)
}
