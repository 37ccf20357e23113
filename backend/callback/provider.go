package callback

import (
	"github.com/provgate/provgate/backend"
)

// Version of the provider; 4.3.0 and later carry JsonResponse,
// StringResponse and NoBody (docs/design.md §12.1).
const Version = "v4.8.0-provgate"

// ActionName is the plugin action the provider offers on machines.
const ActionName = "callbackDo"

// Provider describes the callback plugin provider (docs/design.md
// §12).
func Provider() backend.PluginProvider {
	return backend.PluginProvider{
		Meta: map[string]string{
			"color": "blue", "icon": "phone", "title": "Callback",
		},
		Name:          ProviderName,
		Version:       Version,
		PluginVersion: 4,
		AutoStart:     true,
		AvailableActions: []backend.AvailableAction{{
			Provider:       ProviderName,
			Model:          "machines",
			Command:        ActionName,
			RequiredParams: []string{ParamAction},
			OptionalParams: []string{ParamDataOverride},
		}},
		RequiredParams: []string{ParamCallbacks},
		OptionalParams: []string{ParamAuths},
		StoreObjects:   map[string]any{},
		Documentation: "Sends web requests to external services: the machine action callbackDo sends the " +
			"callback named by callback/action from callback/callbacks; a callback named jobfail is sent " +
			"when a machine's job fails.",
	}
}

// taskScript is the bash template of callback-task. Every value pasted
// into the script goes through shellQuote, the action name is passed as a
// JSON string so that drpcli's YAML parsing keeps it a string, and the
// token is exported rather than put on a command line or traced.
const taskScript = `#!/usr/bin/env bash
# Tell an external service where this machine is, through the callback plugin.
set -e
{{- if eq (toString (.Param "callback/skip")) "true" }}
echo "callback/skip is set: skipping the callback"
exit 0
{{- else if not (.ParamExists "callback/action") }}
echo "callback/action is not set" >&2
exit 1
{{- else }}
export RS_UUID={{ shellQuote .Machine.Uuid }}
export RS_ENDPOINT={{ shellQuote .ApiURL }}
export RS_TOKEN={{ shellQuote .GenerateToken }}
drpcli machines runaction "$RS_UUID" callbackDo \
  --plugin {{ shellQuote (toString (.Param "callback/plugin" | default "callback")) }} \
  callback/action {{ shellQuote (.Param "callback/action" | toString | toJson) }}
exit 0
{{- end }}
`

// Content returns the task, params and stage the provider ships.
func Content() (tasks []*backend.Task, params []*backend.Param, stages []*backend.Stage) {
	task := &backend.Task{
		Name:        "callback-task",
		Description: "Run the callback named by callback/action through the callback plugin",
		Documentation: "Runs callbackDo for this machine with the callback named by callback/action, through " +
			"the plugin named by callback/plugin (default callback). Skipped when callback/skip is true.",
		Templates: []backend.TemplateInfo{{
			Name:     "callback-task.sh",
			Contents: taskScript,
			Meta:     map[string]string{"OS": "linux,darwin"},
		}},
		RequiredParams: []string{},
		OptionalParams: []string{ParamAction, ParamPlugin, ParamSkip},
	}
	task.Meta = map[string]string{"feature-flags": "sane-exit-codes", "title": "Callback"}

	str := map[string]any{"type": "string"}
	params = []*backend.Param{
		{Name: ParamAction, Description: "Name of the callback in callback/callbacks to send", Schema: str},
		{Name: ParamPlugin, Description: "Name of the callback plugin instance the task uses",
			Schema: map[string]any{"type": "string", "default": "callback"}},
		{Name: ParamSkip, Description: "Skip the callback tasks when true",
			Schema: map[string]any{"type": "boolean", "default": false}},
		{Name: ParamDataOverride, Description: "Replaces the body of one callbackDo call; a string is rendered as a template",
			Documentation: "Valid only as a parameter of the action call. A string is rendered as a template and sent " +
				"as is; any other value is sent JSON-encoded; {} sends an empty JSON object.",
			Schema: map[string]any{}},
		// Secure, like callback/auths: header values (API keys) and URLs
		// (user info, query keys) carry credentials, so the callbacks are
		// stored sealed and shown only to getSecure holders asking for
		// ?decode=true.
		{Name: ParamCallbacks, Description: "Callbacks of the plugin, by action name", Secure: true, Schema: callbacksSchema()},
		{Name: ParamAuths, Description: "Named authentication methods of the callbacks", Secure: true, Schema: authsSchema()},
	}
	stage := &backend.Stage{
		Name:        "callback-complete",
		Description: "Send the complete callback",
		Params:      map[string]any{ParamAction: "complete"},
		Tasks:       []string{"callback-task"},
	}
	return []*backend.Task{task}, params, []*backend.Stage{stage}
}

func callbacksSchema() map[string]any {
	str, boolean, integer := schemaTypes()
	strList := map[string]any{"type": "array", "items": str}
	return namedObjectsSchema("Url", map[string]any{
		"Url": str, "Method": map[string]any{"type": "string", "enum": []any{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"}},
		"Headers": map[string]any{"type": "object", "additionalProperties": str},
		"Retry":   integer, "Timeout": integer, "Delay": integer,
		"NoBody": boolean, "JsonResponse": boolean, "StringResponse": boolean, "RawBody": boolean,
		"Debug": boolean, "Auth": str, "Auths": strList, "Aggregate": boolean, "Decode": boolean,
		"ExcludeParams": strList, "InsecureSkipVerify": boolean,
	})
}

func authsSchema() map[string]any {
	str, boolean, integer := schemaTypes()
	return namedObjectsSchema("AuthType", map[string]any{
		"AuthType": map[string]any{"type": "string", "enum": []any{AuthBasic, AuthJSONToken, AuthExec}},
		"Debug":    boolean, "Path": str, "Username": str, "Password": str,
		"Url": str, "Method": str, "Data": str, "Query": str, "TokenField": str, "DurationField": str,
		"Retry": integer, "Timeout": integer, "Delay": integer, "InsecureSkipVerify": boolean,
	})
}

// schemaTypes are the JSON schemas of a string, a boolean and a count.
func schemaTypes() (str, boolean, integer map[string]any) {
	return map[string]any{"type": "string"}, map[string]any{"type": "boolean"}, map[string]any{"type": "integer", "minimum": 0}
}

// namedObjectsSchema is the JSON schema of a param holding objects by name
// (empty by default), each with exactly properties, required among them.
func namedObjectsSchema(required string, properties map[string]any) map[string]any {
	return map[string]any{
		"type":    "object",
		"default": map[string]any{},
		"additionalProperties": map[string]any{
			"type":                 "object",
			"required":             []any{required},
			"properties":           properties,
			"additionalProperties": false,
		},
	}
}
