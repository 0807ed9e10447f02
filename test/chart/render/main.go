// Command chart-render renders a Helm chart the way `helm template` does, without the helm
// binary (Debian does not package it): Go's text/template with Sprig (Debian's
// golang-github-masterminds-sprig-dev) plus the functions and objects Helm adds, written here
// from Helm's documentation (https://helm.sh/docs/chart_template_guide/).
//
// Usage: chart-render [--values FILE]... [--set KEY=VALUE]... [--release-name NAME]
//
//	[--namespace NS] [--kube-version vX.Y.Z] [--show-only templates/FILE]... [--notes] CHART_DIR
//
// Prints every rendered manifest as `---\n# Source: <chart>/templates/<file>\n<document>`,
// ordered by kind as Helm installs them, then NOTES.txt with --notes. On any error (values
// against values.schema.json, kubeVersion constraint, template errors, `required`, `fail`,
// a document that is not YAML with apiVersion and kind) it prints `Error: <message>` on stderr
// and exits 1.
//
// What Helm does and this renderer does too:
//   - all files under templates/ are parsed into one template set; files whose name starts
//     with `_` only define templates; NOTES.txt is rendered apart from the manifests;
//   - missing map keys render as empty (missingkey=zero, "<no value>" removed);
//   - objects .Values, .Release (Name, Namespace, Service "Helm", IsInstall, IsUpgrade,
//     Revision), .Chart (Chart.yaml fields), .Capabilities (KubeVersion, APIVersions.Has),
//     .Files (Get, GetBytes, Glob, Lines, AsConfig, AsSecrets) and .Template (Name, BasePath);
//   - functions: Sprig without env/expandenv, include, tpl, required, toYaml, fromYaml,
//     fromYamlArray, toJson, fromJson, fromJsonArray, lookup (always empty offline);
//   - values: values.yaml, then each --values file, then --set, merged deeply (null deletes a
//     key) and checked against values.schema.json (JSON Schema, gojsonschema as Helm 3 does).
//
// Not implemented (the chart does not use them): subcharts and dependencies, .helmignore,
// toToml, crds/ directory handling, --set with list indexes.
package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/ioutil"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	semver "github.com/Masterminds/semver/v3"
	"github.com/ghodss/yaml"
	"github.com/xeipuuv/gojsonschema"
)

type options struct {
	valueFiles  []string
	sets        []string
	releaseName string
	namespace   string
	kubeVersion string
	notes       bool
	showOnly    []string
	chartDir    string
}

func parseArgs(args []string) (*options, error) {
	o := &options{releaseName: "pillar-csi", namespace: "default", kubeVersion: "v1.34.0"}
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, val, hasVal := strings.Cut(a, "=")
		takes := map[string]bool{"--values": true, "-f": true, "--set": true, "--release-name": true,
			"--namespace": true, "-n": true, "--kube-version": true, "--show-only": true, "-s": true}
		if takes[name] && !hasVal {
			if i+1 >= len(args) {
				return nil, fmt.Errorf("flag needs an argument: %s", name)
			}
			i++
			val = args[i]
		}
		switch name {
		case "--values", "-f":
			o.valueFiles = append(o.valueFiles, val)
		case "--set":
			o.sets = append(o.sets, val)
		case "--release-name":
			o.releaseName = val
		case "--namespace", "-n":
			o.namespace = val
		case "--kube-version":
			o.kubeVersion = val
		case "--notes":
			o.notes = true
		case "--show-only", "-s":
			o.showOnly = append(o.showOnly, val)
		default:
			if strings.HasPrefix(a, "-") || o.chartDir != "" {
				return nil, fmt.Errorf("unknown argument %q", a)
			}
			o.chartDir = a
		}
	}
	if o.chartDir == "" {
		return nil, fmt.Errorf("a chart directory is required")
	}
	return o, nil
}

// ---- chart -----------------------------------------------------------------------------------

// Metadata is Chart.yaml as Helm exposes it to templates (.Chart.Name, .Chart.AppVersion...).
type Metadata struct {
	Name         string            `json:"name"`
	Home         string            `json:"home,omitempty"`
	Sources      []string          `json:"sources,omitempty"`
	Version      string            `json:"version"`
	Description  string            `json:"description,omitempty"`
	Keywords     []string          `json:"keywords,omitempty"`
	Icon         string            `json:"icon,omitempty"`
	APIVersion   string            `json:"apiVersion"`
	Condition    string            `json:"condition,omitempty"`
	Tags         string            `json:"tags,omitempty"`
	AppVersion   string            `json:"appVersion,omitempty"`
	Deprecated   bool              `json:"deprecated,omitempty"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	KubeVersion  string            `json:"kubeVersion,omitempty"`
	Type         string            `json:"type,omitempty"`
	Maintainers  []interface{}     `json:"maintainers,omitempty"`
	Dependencies []interface{}     `json:"dependencies,omitempty"`
}

type chart struct {
	meta      Metadata
	values    map[string]interface{}
	schema    []byte
	templates map[string]string // "<chart>/templates/x.yaml" -> text
	files     Files
}

func loadChart(dir string) (*chart, error) {
	c := &chart{templates: map[string]string{}, files: Files{}}
	raw, err := ioutil.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		return nil, err
	}
	if err := yaml.Unmarshal(raw, &c.meta); err != nil {
		return nil, fmt.Errorf("Chart.yaml: %v", err)
	}
	if c.meta.APIVersion != "v2" || c.meta.Name == "" {
		return nil, fmt.Errorf("Chart.yaml: apiVersion v2 and name are required")
	}
	if _, err := semver.StrictNewVersion(c.meta.Version); err != nil {
		return nil, fmt.Errorf("Chart.yaml: version %q is not SemVer 2", c.meta.Version)
	}
	c.values = map[string]interface{}{}
	if raw, err = ioutil.ReadFile(filepath.Join(dir, "values.yaml")); err == nil {
		if err := yaml.Unmarshal(raw, &c.values); err != nil {
			return nil, fmt.Errorf("values.yaml: %v", err)
		}
	}
	if raw, err = ioutil.ReadFile(filepath.Join(dir, "values.schema.json")); err == nil {
		c.schema = raw
	}
	err = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		data, err := ioutil.ReadFile(p)
		if err != nil {
			return err
		}
		switch {
		case strings.HasPrefix(rel, "templates/"):
			c.templates[c.meta.Name+"/"+rel] = string(data)
		case strings.HasPrefix(rel, "charts/"):
			return fmt.Errorf("subcharts (%s) are not supported by this renderer", rel)
		case rel == "Chart.yaml" || rel == "values.yaml" || rel == "values.schema.json" || rel == "Chart.lock":
		default:
			c.files[rel] = data
		}
		return nil
	})
	return c, err
}

// Files is .Files: the chart's files outside templates/ (Helm's chart.Files).
type Files map[string][]byte

func (f Files) GetBytes(name string) []byte { return f[name] }
func (f Files) Get(name string) string      { return string(f[name]) }

func (f Files) Glob(pattern string) Files {
	out := Files{}
	for name, data := range f {
		if ok, _ := path.Match(pattern, name); ok {
			out[name] = data
		}
	}
	return out
}

func (f Files) Lines(name string) []string {
	if f[name] == nil {
		return []string{}
	}
	return strings.Split(string(f[name]), "\n")
}

// sortedKeys: a map's keys in order (text/template ranges over maps the same way).
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (f Files) AsConfig() string {
	m := map[string]string{}
	for _, n := range sortedKeys(f) {
		m[path.Base(n)] = string(f[n])
	}
	return toYAML(m)
}

func (f Files) AsSecrets() string {
	m := map[string]string{}
	for _, n := range sortedKeys(f) {
		m[path.Base(n)] = base64.StdEncoding.EncodeToString(f[n])
	}
	return toYAML(m)
}

// ---- values ----------------------------------------------------------------------------------

// coalesce merges src over dst: maps deeply, anything else replaced; a null in src deletes.
func coalesce(dst, src map[string]interface{}) map[string]interface{} {
	for k, v := range src {
		if v == nil {
			delete(dst, k)
			continue
		}
		sm, sok := v.(map[string]interface{})
		dm, dok := dst[k].(map[string]interface{})
		if sok && dok {
			dst[k] = coalesce(dm, sm)
		} else {
			dst[k] = v
		}
	}
	return dst
}

func parseSetValue(s string) interface{} {
	switch s {
	case "true":
		return true
	case "false":
		return false
	case "null":
		return nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n
	}
	if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
		out := []interface{}{}
		for _, item := range strings.Split(s[1:len(s)-1], ",") {
			if item != "" {
				out = append(out, parseSetValue(item))
			}
		}
		return out
	}
	return s
}

// applySet applies one --set KEY=VALUE (dotted key, "\." for a literal dot).
func applySet(vals map[string]interface{}, set string) error {
	key, val, ok := strings.Cut(set, "=")
	if !ok || key == "" {
		return fmt.Errorf("--set %q: expected KEY=VALUE", set)
	}
	parts := strings.Split(strings.ReplaceAll(key, `\.`, "\x00"), ".")
	m := map[string]interface{}{}
	cur := m
	for i, p := range parts {
		p = strings.ReplaceAll(p, "\x00", ".")
		if i == len(parts)-1 {
			cur[p] = parseSetValue(val)
		} else {
			next := map[string]interface{}{}
			cur[p] = next
			cur = next
		}
	}
	coalesce(vals, m)
	return nil
}

func loadValues(c *chart, o *options) (map[string]interface{}, error) {
	vals := coalesce(map[string]interface{}{}, deepCopy(c.values))
	for _, f := range o.valueFiles {
		raw, err := ioutil.ReadFile(f)
		if err != nil {
			return nil, err
		}
		user := map[string]interface{}{}
		if err := yaml.Unmarshal(raw, &user); err != nil {
			return nil, fmt.Errorf("failed to parse %s: %v", f, err)
		}
		coalesce(vals, user)
	}
	for _, s := range o.sets {
		if err := applySet(vals, s); err != nil {
			return nil, err
		}
	}
	return vals, validateSchema(c, vals)
}

func deepCopy(m map[string]interface{}) map[string]interface{} {
	raw, _ := json.Marshal(m)
	out := map[string]interface{}{}
	_ = json.Unmarshal(raw, &out)
	return out
}

func validateSchema(c *chart, vals map[string]interface{}) error {
	if c.schema == nil {
		return nil
	}
	doc, err := json.Marshal(vals)
	if err != nil {
		return err
	}
	res, err := gojsonschema.Validate(gojsonschema.NewBytesLoader(c.schema), gojsonschema.NewBytesLoader(doc))
	if err != nil {
		return fmt.Errorf("values.schema.json: %v", err)
	}
	if res.Valid() {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "values don't meet the specifications of the schema(s) in the following chart(s):\n%s:\n",
		c.meta.Name)
	for _, e := range res.Errors() {
		fmt.Fprintf(&b, "- %s\n", e)
	}
	return fmt.Errorf("%s", strings.TrimSuffix(b.String(), "\n"))
}

// ---- capabilities ----------------------------------------------------------------------------

type KubeVersion struct{ Version, Major, Minor, GitVersion string }

func (k KubeVersion) String() string { return k.Version }

type VersionSet []string

func (v VersionSet) Has(apiVersion string) bool {
	for _, x := range v {
		if x == apiVersion {
			return true
		}
	}
	return false
}

type Capabilities struct {
	KubeVersion KubeVersion
	APIVersions VersionSet
}

func capabilities(kv string) (*Capabilities, error) {
	v, err := semver.NewVersion(kv)
	if err != nil {
		return nil, fmt.Errorf("invalid kube version %q: %v", kv, err)
	}
	return &Capabilities{
		KubeVersion: KubeVersion{Version: "v" + v.String(), Major: strconv.FormatUint(v.Major(), 10),
			Minor: strconv.FormatUint(v.Minor(), 10), GitVersion: "v" + v.String()},
		APIVersions: VersionSet{"v1", "apps/v1", "rbac.authorization.k8s.io/v1", "storage.k8s.io/v1",
			"coordination.k8s.io/v1", "events.k8s.io/v1", "apiextensions.k8s.io/v1", "policy/v1"},
	}, nil
}

func checkKubeVersion(c *chart, caps *Capabilities) error {
	if c.meta.KubeVersion == "" {
		return nil
	}
	con, err := semver.NewConstraint(c.meta.KubeVersion)
	if err != nil {
		return fmt.Errorf("Chart.yaml kubeVersion %q: %v", c.meta.KubeVersion, err)
	}
	v, _ := semver.NewVersion(caps.KubeVersion.Version)
	if !con.Check(v) {
		return fmt.Errorf("chart requires kubeVersion: %s which is incompatible with Kubernetes %s",
			c.meta.KubeVersion, caps.KubeVersion.Version)
	}
	return nil
}

func main() {
	o, err := parseArgs(os.Args[1:])
	if err == nil {
		err = run(o)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "Error: %v\n", err)
		os.Exit(1)
	}
}

func run(o *options) error {
	c, err := loadChart(o.chartDir)
	if err != nil {
		return err
	}
	vals, err := loadValues(c, o)
	if err != nil {
		return err
	}
	caps, err := capabilities(o.kubeVersion)
	if err != nil {
		return err
	}
	if err := checkKubeVersion(c, caps); err != nil {
		return err
	}
	top := map[string]interface{}{
		"Values":       vals,
		"Chart":        &c.meta,
		"Capabilities": caps,
		"Files":        c.files,
		"Release": map[string]interface{}{"Name": o.releaseName, "Namespace": o.namespace,
			"Service": "Helm", "IsInstall": true, "IsUpgrade": false, "Revision": 1},
	}
	out, err := renderAll(c, top)
	if err != nil {
		return err
	}
	manifests, notes, err := sortManifests(c, out)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	for _, m := range manifests {
		if !shown(o, c, m.source) {
			continue
		}
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", m.source, m.content)
	}
	if o.notes && notes != "" {
		fmt.Fprintf(&b, "\nNOTES:\n%s\n", notes)
	}
	_, err = os.Stdout.Write(b.Bytes())
	return err
}

// shown: --show-only TEMPLATE (e.g. templates/role.yaml, repeatable) keeps only those templates.
func shown(o *options, c *chart, source string) bool {
	if len(o.showOnly) == 0 {
		return true
	}
	for _, s := range o.showOnly {
		if source == c.meta.Name+"/"+s {
			return true
		}
	}
	return false
}

// ---- manifests -------------------------------------------------------------------------------

type manifest struct {
	source, content, kind string
}

// installOrder is the kind order Helm installs in (unknown kinds last, by kind name).
var installOrder = []string{"Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange", "PodSecurityPolicy",
	"PodDisruptionBudget", "ServiceAccount", "Secret", "SecretList", "ConfigMap", "StorageClass",
	"PersistentVolume", "PersistentVolumeClaim", "CustomResourceDefinition", "ClusterRole", "ClusterRoleList",
	"ClusterRoleBinding", "ClusterRoleBindingList", "Role", "RoleList", "RoleBinding", "RoleBindingList",
	"Service", "DaemonSet", "Pod", "ReplicationController", "ReplicaSet", "Deployment", "HorizontalPodAutoscaler",
	"StatefulSet", "Job", "CronJob", "IngressClass", "Ingress", "APIService"}

var sep = regexp.MustCompile(`(?:^|\s*\n)---\s*`)

func sortManifests(c *chart, rendered map[string]string) ([]manifest, string, error) {
	var out []manifest
	notes := ""
	for _, name := range sortedKeys(rendered) {
		if path.Base(name) == "NOTES.txt" {
			notes = strings.TrimSpace(rendered[name])
			continue
		}
		for _, doc := range sep.Split(rendered[name], -1) {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			var head struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
				return nil, "", fmt.Errorf("YAML parse error on %s: %v", name, err)
			}
			if head.Kind == "" || head.APIVersion == "" {
				if onlyComments(doc) {
					continue
				}
				return nil, "", fmt.Errorf("%s: a document without apiVersion or kind", name)
			}
			out = append(out, manifest{source: name, content: strings.TrimSpace(doc), kind: head.Kind})
		}
	}
	rank := func(kind string) int {
		for i, k := range installOrder {
			if k == kind {
				return i
			}
		}
		return len(installOrder)
	}
	sort.SliceStable(out, func(i, j int) bool {
		ri, rj := rank(out[i].kind), rank(out[j].kind)
		if ri != rj {
			return ri < rj
		}
		if ri == len(installOrder) {
			return out[i].kind < out[j].kind
		}
		return false
	})
	return out, notes, nil
}

func onlyComments(doc string) bool {
	for _, line := range strings.Split(doc, "\n") {
		t := strings.TrimSpace(line)
		if t != "" && !strings.HasPrefix(t, "#") {
			return false
		}
	}
	return true
}
