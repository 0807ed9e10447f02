// The template engine: text/template + Sprig + the functions Helm adds (see main.go).
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"
	"text/template"

	sprig "github.com/Masterminds/sprig/v3"
	"github.com/ghodss/yaml"
)

const recursionMaxNums = 1000

// toYAML is Helm's toYaml: sigs.k8s.io/yaml (ghodss/yaml here, its origin) without the final newline.
func toYAML(v interface{}) string {
	data, err := yaml.Marshal(v)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(data), "\n")
}

func yamlUnmarshal(b []byte, v interface{}) error { return yaml.Unmarshal(b, v) }

// fromDoc is fromYaml/fromJson: a map, or {"Error": message} when s does not parse.
func fromDoc(unmarshal func([]byte, interface{}) error, s string) map[string]interface{} {
	m := map[string]interface{}{}
	if err := unmarshal([]byte(s), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

// fromDocArray is fromYamlArray/fromJsonArray: a list, or [message] when s does not parse.
func fromDocArray(unmarshal func([]byte, interface{}) error, s string) []interface{} {
	a := []interface{}{}
	if err := unmarshal([]byte(s), &a); err != nil {
		a = []interface{}{err.Error()}
	}
	return a
}

func toJSON(v interface{}) string {
	data, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(data)
}

// required fails the render with msg when val is nil or the empty string.
func required(msg string, val interface{}) (interface{}, error) {
	if val == nil {
		return val, fmt.Errorf("%s", msg)
	}
	if s, ok := val.(string); ok && s == "" {
		return val, fmt.Errorf("%s", msg)
	}
	return val, nil
}

type engine struct {
	t        *template.Template
	included map[string]int
}

func (e *engine) include(name string, data interface{}) (string, error) {
	if e.included[name] > recursionMaxNums {
		return "", fmt.Errorf("unable to execute templates: rendering templates has a nested reference name: %s", name)
	}
	e.included[name]++
	defer func() { e.included[name]-- }()
	var buf bytes.Buffer
	if err := e.t.ExecuteTemplate(&buf, name, data); err != nil {
		return "", err
	}
	return buf.String(), nil
}

// tpl renders a string as a template with every named template of the chart available; the
// name it runs under is the calling template's (.Template.Name of vals).
func (e *engine) tpl(text string, vals interface{}) (string, error) {
	t, err := e.t.Clone()
	if err != nil {
		return "", err
	}
	name := "tpl"
	if m, ok := vals.(map[string]interface{}); ok {
		if tm, ok := m["Template"].(map[string]interface{}); ok {
			if n, ok := tm["Name"].(string); ok {
				name = n
			}
		}
	}
	t.Option("missingkey=zero")
	if _, err := t.New(name).Parse(text); err != nil {
		return "", fmt.Errorf("cannot parse template %q: %v", text, err)
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, name, vals); err != nil {
		return "", fmt.Errorf("error during tpl function execution for %q: %v", text, err)
	}
	return strings.ReplaceAll(buf.String(), "<no value>", ""), nil
}

func (e *engine) funcMap() template.FuncMap {
	f := sprig.TxtFuncMap()
	delete(f, "env")
	delete(f, "expandenv")
	extra := template.FuncMap{
		"toYaml":        toYAML,
		"fromYaml":      func(s string) map[string]interface{} { return fromDoc(yamlUnmarshal, s) },
		"fromYamlArray": func(s string) []interface{} { return fromDocArray(yamlUnmarshal, s) },
		"toJson":        toJSON,
		"fromJson":      func(s string) map[string]interface{} { return fromDoc(json.Unmarshal, s) },
		"fromJsonArray": func(s string) []interface{} { return fromDocArray(json.Unmarshal, s) },
		"include":       e.include, "tpl": e.tpl, "required": required,
		"lookup": func(string, string, string, string) (map[string]interface{}, error) {
			return map[string]interface{}{}, nil
		},
	}
	for k, v := range extra {
		f[k] = v
	}
	return f
}

var execErr = regexp.MustCompile(`^template: (\S+?:\d+:\d+): executing .* error calling (?:fail|required): (.*)$`)

// cleanupExecError shortens the error of `fail` or `required` as Helm does:
// "execution error at (<template>:<line>:<col>): <message>", naming the innermost template.
func cleanupExecError(name string, err error) error {
	msg := err.Error()
	if i := strings.LastIndex(msg, "template: "); i > 0 {
		msg = msg[i:]
	}
	if m := execErr.FindStringSubmatch(msg); m != nil {
		return fmt.Errorf("execution error at (%s): %s", m[1], m[2])
	}
	return fmt.Errorf("template %s: %v", name, err)
}

// parseOrder is Helm's: deeper paths first, then names in reverse order.
func parseOrder(names []string) []string {
	sort.Slice(names, func(i, j int) bool {
		di, dj := strings.Count(names[i], "/"), strings.Count(names[j], "/")
		if di != dj {
			return di > dj
		}
		return names[i] > names[j]
	})
	return names
}

func renderAll(c *chart, top map[string]interface{}) (map[string]string, error) {
	e := &engine{included: map[string]int{}}
	e.t = template.New("gotpl").Option("missingkey=zero")
	e.t.Funcs(e.funcMap())
	names := sortedKeys(c.templates)
	for _, n := range parseOrder(append([]string(nil), names...)) {
		if _, err := e.t.New(n).Parse(c.templates[n]); err != nil {
			return nil, fmt.Errorf("parse error at (%s): %v", n, err)
		}
	}
	out := map[string]string{}
	for _, n := range names {
		if strings.HasPrefix(path.Base(n), "_") {
			continue
		}
		vals := map[string]interface{}{}
		for k, v := range top {
			vals[k] = v
		}
		vals["Template"] = map[string]interface{}{"Name": n, "BasePath": c.meta.Name + "/templates"}
		var buf bytes.Buffer
		if err := e.t.ExecuteTemplate(&buf, n, vals); err != nil {
			return nil, cleanupExecError(n, err)
		}
		out[n] = strings.ReplaceAll(buf.String(), "<no value>", "")
	}
	return out, nil
}
