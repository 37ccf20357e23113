// Package ui is the access explorer's page at /ui/ (docs/design.md §9.10):
// server-rendered html/template views embedded in the binary, readable with
// JavaScript off, every asset from the server itself (the page is served
// with Content-Security-Policy default-src 'self'), and read-only: every
// form is a GET that asks a question.
package ui

import (
	"embed"
	"html/template"
	"io"
	"io/fs"
	"strings"

	"github.com/provgate/provgate/gateway/access"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// Static is the page's stylesheet and script, served under /ui/static/.
func Static() fs.FS {
	sub, _ := fs.Sub(staticFiles, "static")
	return sub
}

// Views, each a template of its own.
const (
	ViewHome       = "home"
	ViewExplain    = "explain"
	ViewMatrix     = "matrix"
	ViewWho        = "who"
	ViewTenant     = "tenant"
	ViewRoleDiff   = "roles"
	ViewEscalation = "escalation"
	ViewDenials    = "denials"
	ViewError      = "error"
)

// Nav is the views the navigation names, in order.
var Nav = []struct{ View, Path, Title string }{
	{ViewExplain, "/ui/explain", "Explain a request"},
	{ViewMatrix, "/ui/users", "What a user can do"},
	{ViewWho, "/ui/who", "Who can"},
	{ViewTenant, "/ui/tenants", "A tenant's view"},
	{ViewRoleDiff, "/ui/roles", "Role diff"},
	{ViewEscalation, "/ui/escalation", "Who can hand out authority"},
	{ViewDenials, "/ui/denials", "Recent denials"},
}

// Page is what every view renders: who is looking, the view, the form's
// values as asked, and the answer (nil before a question is asked).
type Page struct {
	Title string
	User  string
	View  string
	Form  map[string]string
	// Error is a refused or failed question: its status and messages.
	Error *Failure
	Data  any
}

// Failure is a question the server refused or could not answer.
type Failure struct {
	Status   int
	Messages []string
}

// Denial is one refused request of the decision log, as the denials view
// lists it.
type Denial struct {
	DecisionID string
	Time       string
	Principal  string
	Method     string
	Path       string
	Reasons    []string
}

// Views data types for the templates.
type (
	ExplainData    = access.Explanation
	MatrixData     = access.Matrix
	WhoData        = access.Who
	TenantData     = access.TenantView
	RoleDiffData   = access.RoleDiff
	EscalationData = access.Escalation
)

var funcs = template.FuncMap{
	"join":  strings.Join,
	"nav":   func() any { return Nav },
	"split": strings.Fields,
}

var templates = template.Must(template.New("").Funcs(funcs).ParseFS(templateFiles, "templates/*.html"))

// Render writes the page of view p.View.
func Render(w io.Writer, p Page) error {
	return templates.ExecuteTemplate(w, p.View+".html", p)
}
