package render

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"text/template"
	"text/template/parse"

	"github.com/Masterminds/sprig/v3"
)

var errTooMany = errors.New("template built a list larger than the limit")

// removed lists the Sprig functions templates never get: they read the
// environment or the network, depend on the clock or randomness (renders
// must be repeatable), or burn CPU and memory on purpose (key generation,
// bcrypt, scrypt).
var removed = []string{
	"env", "expandenv", "getHostByName",
	"now", "ago",
	"randAlphaNum", "randAlpha", "randAscii", "randNumeric", "randBytes", "randInt", "uuidv4", "shuffle",
	"genPrivateKey", "derivePassword", "buildCustomCert", "genCA", "genCAWithKey",
	"genSelfSignedCert", "genSelfSignedCertWithKey", "genSignedCert", "genSignedCertWithKey",
	"bcrypt", "htpasswd",
}

const guardName = "__provgateGuard"

// guard carries one render's budget into every function call.
type guard struct {
	ctx context.Context
	lim Limits
}

func (g *guard) check() error {
	if err := g.ctx.Err(); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return ErrTimeout
		}
		return err
	}
	return nil
}

// count rejects n items above the list limit before anything is allocated.
func (g *guard) count(n float64) error {
	if n > float64(g.lim.MaxItems) {
		return errTooMany
	}
	return nil
}

func (g *guard) size(n float64) error {
	if n > float64(g.lim.MaxOutput) {
		return ErrOutputTooLarge
	}
	return nil
}

// funcMap builds the function set for one render: hermetic Sprig, the
// size-capped replacements of Sprig's generators, shellQuote, and the range
// guard; every function is wrapped so that it checks the deadline before it
// runs and the size of what it returns.
func funcMap(g *guard, mode Mode) template.FuncMap {
	fm := sprig.TxtFuncMap()
	for _, name := range removed {
		delete(fm, name)
	}
	orig := sprig.GenericFuncMap()
	fm["until"] = func(n int) ([]int, error) {
		if err := g.count(float64(n)); err != nil {
			return nil, err
		}
		return orig["until"].(func(int) []int)(n), nil
	}
	fm["untilStep"] = func(start, stop, step int) ([]int, error) {
		if step != 0 {
			if err := g.count(math.Abs(float64(stop)-float64(start)) / math.Abs(float64(step))); err != nil {
				return nil, err
			}
		}
		return orig["untilStep"].(func(int, int, int) []int)(start, stop, step), nil
	}
	fm["seq"] = func(params ...int) (string, error) {
		var span float64
		switch len(params) {
		case 1:
			span = math.Abs(float64(params[0]) - 1)
		case 2:
			span = math.Abs(float64(params[1]) - float64(params[0]))
		case 3:
			if params[1] != 0 {
				span = math.Abs(float64(params[2])-float64(params[0])) / math.Abs(float64(params[1]))
			}
		}
		if err := g.count(span); err != nil {
			return "", err
		}
		return orig["seq"].(func(...int) string)(params...), nil
	}
	fm["repeat"] = func(count int, s string) (string, error) {
		if count < 0 {
			return "", errors.New("repeat: negative count")
		}
		if err := g.size(float64(count) * float64(len(s))); err != nil {
			return "", err
		}
		return strings.Repeat(s, count), nil
	}
	indent := func(spaces int, s string) (string, error) {
		if spaces < 0 {
			return "", errors.New("indent: negative width")
		}
		lines := float64(strings.Count(s, "\n") + 1)
		if err := g.size(float64(spaces)*lines + float64(len(s))); err != nil {
			return "", err
		}
		pad := strings.Repeat(" ", spaces)
		return pad + strings.ReplaceAll(s, "\n", "\n"+pad), nil
	}
	fm["indent"] = indent
	fm["nindent"] = func(spaces int, s string) (string, error) {
		out, err := indent(spaces, s)
		return "\n" + out, err
	}
	// printf and friends are builtins; overriding them puts them under the
	// same deadline and size checks as every other function.
	fm["printf"] = fmt.Sprintf
	fm["print"] = fmt.Sprint
	fm["println"] = fmt.Sprintln
	fm["shellQuote"] = ShellQuote
	fm[guardName] = func(v any) (any, error) {
		rv := reflect.ValueOf(v)
		switch rv.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			if err := g.count(float64(rv.Int())); err != nil {
				return nil, err
			}
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
			if err := g.count(float64(rv.Uint())); err != nil {
				return nil, err
			}
		case reflect.Func, reflect.Chan:
			// Iterator functions and channels have no length to bound.
			return nil, errors.New("range over functions and channels is not allowed")
		}
		return v, nil
	}
	for name, fn := range fm {
		fm[name] = wrap(g, fn)
	}
	return fm
}

var errorType = reflect.TypeFor[error]()

// wrap returns fn with the deadline checked before each call and its result
// bounded after it.
func wrap(g *guard, fn any) any {
	fv := reflect.ValueOf(fn)
	ft := fv.Type()
	hasErr := ft.NumOut() == 2 && ft.Out(1) == errorType
	return reflect.MakeFunc(ft, func(args []reflect.Value) []reflect.Value {
		if err := g.check(); err != nil {
			return failWith(ft, hasErr, err)
		}
		var out []reflect.Value
		if ft.IsVariadic() {
			out = fv.CallSlice(args)
		} else {
			out = fv.Call(args)
		}
		if len(out) > 0 {
			if err := g.bound(out[0]); err != nil {
				return failWith(ft, hasErr, err)
			}
		}
		return out
	}).Interface()
}

func failWith(ft reflect.Type, hasErr bool, err error) []reflect.Value {
	if !hasErr {
		// text/template turns a panicking function into an execution error.
		panic(err)
	}
	return []reflect.Value{reflect.Zero(ft.Out(0)), reflect.ValueOf(&err).Elem()}
}

func (g *guard) bound(v reflect.Value) error {
	for v.IsValid() && v.Kind() == reflect.Interface && !v.IsNil() {
		v = v.Elem()
	}
	if !v.IsValid() {
		return nil
	}
	switch v.Kind() {
	case reflect.String:
		return g.size(float64(v.Len()))
	case reflect.Slice, reflect.Array, reflect.Map:
		if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8 {
			return g.size(float64(v.Len()))
		}
		return g.count(float64(v.Len()))
	}
	return nil
}

// guardRanges rewrites every {{range pipeline}} into {{range pipeline |
// guard}}: a range over an integer counts that many times without calling
// anything, so the guard bounds the count and checks the deadline on every
// range entry.
func guardRanges(t *parse.Tree, n parse.Node) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			guardRanges(t, c)
		}
	case *parse.RangeNode:
		if n.Pipe != nil {
			id := parse.NewIdentifier(guardName).SetTree(t).SetPos(n.Pos)
			n.Pipe.Cmds = append(n.Pipe.Cmds, &parse.CommandNode{NodeType: parse.NodeCommand, Pos: n.Pos, Args: []parse.Node{id}})
		}
		guardRanges(t, n.List)
		guardRanges(t, n.ElseList)
	case *parse.IfNode:
		guardRanges(t, n.List)
		guardRanges(t, n.ElseList)
	case *parse.WithNode:
		guardRanges(t, n.List)
		guardRanges(t, n.ElseList)
	}
}

// ShellQuote quotes s for a POSIX shell: single quotes, with embedded single
// quotes closed, escaped and reopened. Values pasted into task scripts go
// through it so that a param can never become shell syntax.
func ShellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
