package render

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/provgate/provgate/backend"
)

// run is the state one render shares between its data values.
type run struct {
	ctx   context.Context
	mode  Mode
	env   Env
	lim   Limits
	depth int
	m     *backend.Machine
}

// Data is the dot of caller-mode templates: machine fields and the
// template functions of docs/design.md §12.3, without GetAuthString or token generation.
type Data struct {
	Machine MachineView
	r       *run
}

// ConfigData is the dot of configuration templates: Data plus GetAuthString.
type ConfigData struct{ *Data }

// TaskData is the dot of server-side task templates: ConfigData plus machine
// token generation.
type TaskData struct{ *ConfigData }

// MachineView is .Machine: every field of the machine (Secret blanked), the
// DRP spelling .Machine.UUID, and DRP's machine helpers, which DRP offers
// under .Machine while provgate also offers them at the top level; both work.
type MachineView struct {
	*backend.Machine
	r *run
}

func newData(ctx context.Context, mode Mode, env Env, lim Limits, depth int) any {
	m := &backend.Machine{}
	if env.Machine != nil {
		cp := *env.Machine
		m = &cp
	}
	m.Secret = ""
	if m.Params == nil {
		m.Params = map[string]any{}
	}
	r := &run{ctx: ctx, mode: mode, env: env, lim: lim, depth: depth, m: m}
	d := &Data{Machine: MachineView{Machine: m, r: r}, r: r}
	switch mode {
	case Task:
		return &TaskData{&ConfigData{d}}
	case Config:
		return &ConfigData{d}
	}
	return d
}

// UUID is DRP's spelling of the machine's Uuid.
func (m MachineView) UUID() string { return m.Machine.Uuid }

// HexAddress is the machine's IPv4 address as eight upper-case hex digits
// (the PXE config file name form); empty for IPv6 or no address.
func (m MachineView) HexAddress() string {
	ip := net.ParseIP(m.Machine.Address).To4()
	if ip == nil {
		return ""
	}
	return strings.ToUpper(hex.EncodeToString(ip))
}

// ShortName is the machine name up to the first dot.
func (m MachineView) ShortName() string {
	name, _, _ := strings.Cut(m.Machine.Name, ".")
	return name
}

// Path is the machine's directory in the file server space.
func (m MachineView) Path() string { return "machines/" + m.Machine.Uuid }

// Url is Path as a URL on the file server.
func (m MachineView) Url() string { return provisionURL(m.r.env.Info) + "/" + m.Path() }

// HasProfile reports whether the profile is directly on the machine.
func (m MachineView) HasProfile(name string) bool { return slices.Contains(m.Machine.Profiles, name) }

// MacAddr returns the machine's first hardware address: raw (canonical
// lower-case, colon separated) by default; "pxe" and DRP's "pxelinux" give
// 01- followed by the address with hyphens; "rpi4" gives it with hyphens.
func (m MachineView) MacAddr(format ...string) (string, error) {
	if len(format) > 1 {
		return "", errors.New("MacAddr takes at most one format")
	}
	if len(m.Machine.HardwareAddrs) == 0 {
		return "", nil
	}
	mac := m.Machine.HardwareAddrs[0]
	if hw, err := net.ParseMAC(mac); err == nil {
		mac = hw.String()
	}
	f := ""
	if len(format) == 1 {
		f = format[0]
	}
	switch f {
	case "", "raw":
		return mac, nil
	case "pxe", "pxelinux":
		return "01-" + strings.ReplaceAll(mac, ":", "-"), nil
	case "rpi4":
		return strings.ReplaceAll(mac, ":", "-"), nil
	}
	return "", fmt.Errorf("MacAddr: unknown format %q (raw, pxe, pxelinux, rpi4)", f)
}

// Param is the value of a parameter through the full hierarchy; nil when
// it is set nowhere, so that Sprig's default works on it.
func (d *Data) Param(name string) (any, error) {
	v, _, err := d.lookup(name)
	return v, err
}

func (d *Data) lookup(name string) (any, bool, error) {
	if d.r.env.Params != nil {
		return d.r.env.Params(d.r.ctx, name)
	}
	v, ok := d.r.m.Params[name]
	return v, ok, nil
}

// ParamExists reports whether the parameter is set anywhere in the hierarchy.
func (d *Data) ParamExists(name string) (bool, error) {
	_, ok, err := d.lookup(name)
	return ok, err
}

// ParamExpand is Param with every string in the value (also inside maps and
// lists) rendered as a template, so a param can refer to other params.
// Nesting is bounded so that a param cannot expand itself forever.
//
// A param value is written by whoever may update the machine, profile or
// stage that holds it, not by the operator who wrote the outer template, so
// it is always rendered with the caller functions: no GetAuthString, no
// machine tokens, and errors without data, whatever the outer template's
// mode.
func (d *Data) ParamExpand(name string) (any, error) {
	v, _, err := d.lookup(name)
	if err != nil {
		return nil, err
	}
	if d.r.depth >= maxExpandDepth {
		return nil, errors.New("ParamExpand: nesting too deep")
	}
	return d.expand(v)
}

func (d *Data) expand(v any) (any, error) {
	switch v := v.(type) {
	case string:
		env := d.r.env
		env.AuthString, env.Tokens = nil, nil
		return renderDepth(d.r.ctx, Caller, "param", v, env, d.r.lim, d.r.depth+1)
	case map[string]any:
		out := make(map[string]any, len(v))
		if err := expandEach(d, maps.All(v), func(k string, x any) { out[k] = x }); err != nil {
			return nil, err
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		if err := expandEach(d, slices.All(v), func(i int, x any) { out[i] = x }); err != nil {
			return nil, err
		}
		return out, nil
	}
	return v, nil
}

// expandEach expands every value of seq and hands it to set with its key.
func expandEach[K any](d *Data, seq iter.Seq2[K, any], set func(K, any)) error {
	for k, e := range seq {
		x, err := d.expand(e)
		if err != nil {
			return err
		}
		set(k, x)
	}
	return nil
}

// ParamAsJSON is the parameter encoded as JSON, with no trailing newline.
func (d *Data) ParamAsJSON(name string) (string, error) { return d.paramAs(name, json.Marshal) }

// ParamAsYAML is the parameter encoded as YAML.
func (d *Data) ParamAsYAML(name string) (string, error) { return d.paramAs(name, yaml.Marshal) }

// paramAs is the parameter encoded with marshal.
func (d *Data) paramAs(name string, marshal func(any) ([]byte, error)) (string, error) {
	v, _, err := d.lookup(name)
	if err != nil {
		return "", err
	}
	b, err := marshal(v)
	return string(b), err
}

// The machine helpers at the top level, as docs/design.md §12.3 lists them.

func (d *Data) HexAddress() string                           { return d.Machine.HexAddress() }
func (d *Data) ShortName() string                            { return d.Machine.ShortName() }
func (d *Data) Path() string                                 { return d.Machine.Path() }
func (d *Data) Url() string                                  { return d.Machine.Url() }
func (d *Data) HasProfile(name string) bool                  { return d.Machine.HasProfile(name) }
func (d *Data) MacAddr(format ...string) (string, error)     { return d.Machine.MacAddr(format...) }
func (d *Data) ProvisionerAddress() string                   { return d.r.env.Info.Address }
func (d *Data) ProvisionURL() string                         { return provisionURL(d.r.env.Info) }
func (d *Data) ProvisionerURL() string                       { return provisionURL(d.r.env.Info) }
func (d *Data) ApiURL() string                               { return apiURL(d.r.env.Info) }
func (d *Data) Info() Info                                   { return d.r.env.Info }
func (d *Data) ParseUrl(segment, raw string) (string, error) { return d.ParseURL(segment, raw) }

// ParseURL returns one segment of a URL: scheme, host (with port), hostname,
// port, path, query (the raw query), fragment or user (the user name only;
// a password in the URL is never returned).
func (d *Data) ParseURL(segment, raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", errors.New("ParseURL: invalid URL")
	}
	switch segment {
	case "scheme":
		return u.Scheme, nil
	case "host":
		return u.Host, nil
	case "hostname":
		return u.Hostname(), nil
	case "port":
		return u.Port(), nil
	case "path":
		return u.Path, nil
	case "query", "rawquery":
		return u.RawQuery, nil
	case "fragment":
		return u.Fragment, nil
	case "user":
		return u.User.Username(), nil
	}
	return "", fmt.Errorf("ParseURL: unknown segment %q (scheme, host, hostname, port, path, query, fragment, user)", segment)
}

// GetAuthString runs the named exec auth and inserts its output as is.
func (c *ConfigData) GetAuthString(name string) (string, error) {
	if c.r.env.AuthString == nil {
		return "", errors.New("GetAuthString: no auths available")
	}
	return c.r.env.AuthString(c.r.ctx, name)
}

// GenerateToken mints a machine token whose lifetime follows the server's
// token timeout preferences.
func (t *TaskData) GenerateToken() (string, error) {
	if t.r.env.Tokens == nil {
		return "", errors.New("GenerateToken: token generation unavailable")
	}
	return t.r.env.Tokens.GenerateToken(t.r.ctx, t.r.env.Machine)
}

// GenerateInfiniteToken mints a long-lived Machine Operations token.
func (t *TaskData) GenerateInfiniteToken() (string, error) {
	if t.r.env.Tokens == nil {
		return "", errors.New("GenerateInfiniteToken: token generation unavailable")
	}
	return t.r.env.Tokens.GenerateInfiniteToken(t.r.ctx, t.r.env.Machine)
}

func provisionURL(i Info) string {
	if i.FileURL != "" {
		return strings.TrimRight(i.FileURL, "/")
	}
	return "http://" + hostPort(i.Address, i.FilePort)
}

func apiURL(i Info) string {
	if i.ApiURL != "" {
		return strings.TrimRight(i.ApiURL, "/")
	}
	return "https://" + hostPort(i.Address, i.ApiPort)
}

// hostPort brackets IPv6 addresses, which DRP's callback renderer forgot.
func hostPort(addr string, port int) string {
	if port == 0 {
		if strings.Contains(addr, ":") {
			return "[" + addr + "]"
		}
		return addr
	}
	return net.JoinHostPort(addr, strconv.Itoa(port))
}
