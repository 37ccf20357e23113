package callback

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"regexp"

	"github.com/provgate/provgate/backend"
)

// A callback plugin's configuration acts later on machines its writer may
// not read: a callback sends them to the writer's Url. So a plugin is
// privileged configuration (docs/design.md §5.9, §12.1): its writer must
// hold, for every piece that can carry machines' secrets, what a reader of
// those secrets holds, and an explicit claim to run programs on the server.

// secretsClaim is what a writer of a secret-carrying callback must hold:
// get and getSecure over every machine, since any machine may be sent
// (callbackDo is run on machines by whoever may, jobfail on every failing
// machine).
var secretsClaim = backend.Claim{Scope: "machines", Action: "get,getSecure", Specific: "*"}

// paramRef finds, in a template action of a Url, a reference to params:
// .Param, .ParamExists, .ParamExpand, .ParamAsJSON, .ParamAsYAML or
// .Machine.Params.
var paramRef = regexp.MustCompile(`\{\{[^}]*Param`)

// Grants names the pieces of a callback plugin's configuration (params in
// the clear) that need more than plugins create or update, keyed by the
// piece and its content, with the claims their writer must hold:
//
//   - a callback that can carry machines' secrets: Decode, params reached
//     from its Url template, or jobfail (sent for every failing machine)
//     needs machines get,getSecure *;
//   - an exec auth, which runs a program on the server, needs plugins exec
//     <plugin>.
//
// A piece whose content changes gets a new key, so redirecting a jobfail
// callback to another Url is checked as a new one. Other providers' plugins
// need nothing more.
func Grants(p *backend.Plugin) map[string][]backend.Claim {
	if p == nil || p.Provider != ProviderName {
		return nil
	}
	cfg, _ := Parse(p.Params, ValidateOptions{})
	out := map[string][]backend.Claim{}
	for name, cb := range cfg.Callbacks {
		if cb.Decode || name == JobFail || paramRef.MatchString(cb.Url) {
			out["callback "+name+" "+fingerprint(cb)] = []backend.Claim{secretsClaim}
		}
	}
	for name, a := range cfg.Auths {
		if a.AuthType == AuthExec {
			out["exec "+name+" "+fingerprint(a)] = []backend.Claim{{Scope: "plugins", Action: "exec", Specific: p.Name}}
		}
	}
	return out
}

func fingerprint(v any) string {
	b, _ := json.Marshal(v)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}
