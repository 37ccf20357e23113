package objects

import (
	"context"

	"github.com/provgate/provgate/backend"
)

// pluginRules are the rules of plugins: the known providers, and what the
// provider says of a plugin's configuration (Options.ValidatePlugin,
// Options.PluginGrants, docs/design.md §12.1).
type pluginRules struct {
	*core
	providers map[string]bool
	validate  func(*backend.Plugin) []string
	grantsOf  func(*backend.Plugin) map[string][]backend.Claim
}

func newPluginRules(c *core, o Options) *pluginRules {
	pl := &pluginRules{core: c, providers: map[string]bool{"callback": true}, validate: o.ValidatePlugin, grantsOf: o.PluginGrants}
	for _, p := range o.Providers {
		pl.providers[p] = true
	}
	return pl
}

// check: the name, and a provider that exists. DRP keeps plugins whose
// provider is not (yet) installed, unavailable.
func (s *pluginRules) check(_ context.Context, p *backend.Plugin, _ backend.Model, c *check) error {
	nameRule(c, p.Name, backend.ValidName)
	switch {
	case !backend.ValidName(p.Provider):
		c.bad("Invalid Provider `%s`", p.Provider)
	case !s.providers[p.Provider]:
		c.warn("Plugin provider %s does not exist", p.Provider)
	}
	return nil
}

// configured: the provider's checks of a plugin's configuration, on clear
// values (secure params decoded); its messages make the plugin
// unavailable.
func (s *pluginRules) configured(m backend.Model, c *check) {
	if s.validate == nil {
		return
	}
	c.soft = append(c.soft, s.validate(s.clearPlugin(m.(*backend.Plugin)))...)
}

// grants: the configuration pieces of p that can carry machines' secrets
// or run programs on the server, and that old did not have as they are
// now, with the claims their writer must hold (Options.PluginGrants,
// docs/design.md §12.1).
func (s *pluginRules) grants(_ context.Context, p, old *backend.Plugin) ([]backend.Grant, error) {
	if s.grantsOf == nil {
		return nil, nil
	}
	had := map[string]bool{}
	if old != nil {
		for k := range s.grantsOf(s.clearPlugin(old)) {
			had[k] = true
		}
	}
	var claims []backend.Claim
	for k, cs := range s.grantsOf(s.clearPlugin(p)) {
		if !had[k] {
			claims = append(claims, cs...)
		}
	}
	if len(claims) == 0 {
		return nil, nil
	}
	return []backend.Grant{{Claims: claims}}, nil
}

// clearPlugin is a copy of p with its secure params decoded, as the
// provider sees them.
func (s *pluginRules) clearPlugin(p *backend.Plugin) *backend.Plugin {
	view := clone(p).(*backend.Plugin)
	for k, v := range view.Params {
		view.Params[k] = s.openValue(binding{"plugins", p.Name, k}, v)
	}
	return view
}
