package kubernetes

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/yannh/kubeconform/pkg/validator"
	"sigs.k8s.io/yaml"
)

// The schemas come from the OpenAPI document the Kubernetes project publishes in its repository
// (api/openapi-spec/swagger.json), taken from the k8s.io/kubernetes module zip through the Go
// module proxy; the usual kubeconform schemas are downloaded from GitHub, which CI cannot reach.
// The hash pins the zip, as go.sum would.
const (
	kubernetesModule  = "k8s.io/kubernetes"
	kubernetesVersion = "v1.37.2"
	kubernetesSum     = "h1:A2VDEiObzkYqFTKhSsn0ZEb0RlLEXpHWj93gi2HqEwE="
)

// schemaDir holds the JSON schemas written by TestMain, in kubeconform's layout.
var schemaDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "k8s-schemas-")
	if err == nil {
		err = writeSchemas(dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubernetes schemas:", err)
		os.Exit(1)
	}
	schemaDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// writeSchemas fetches the OpenAPI document and writes it as kubeconform schemas: one file per
// kind, <kind>-<group>-<version>.json (the names kubeconform looks up), each referring to
// _definitions.json. As in kubeconform's own -strict schemas, every object with declared
// properties gets additionalProperties: false, so an unknown or misspelled field is an error.
func writeSchemas(dir string) error {
	cmd := exec.Command("go", "mod", "download", "-json", kubernetesModule+"@"+kubernetesVersion)
	cmd.Dir = dir // outside any module: nothing of ours is resolved or changed
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var mod struct{ Dir, Sum, Error string }
	if jerr := json.Unmarshal(out, &mod); err != nil || jerr != nil || mod.Error != "" {
		return fmt.Errorf("go mod download %s@%s: %v %s %s", kubernetesModule, kubernetesVersion, err, mod.Error, stderr.String())
	}
	if mod.Sum != kubernetesSum {
		return fmt.Errorf("%s@%s: hash %s, want %s", kubernetesModule, kubernetesVersion, mod.Sum, kubernetesSum)
	}
	spec, err := os.ReadFile(filepath.Join(mod.Dir, "api", "openapi-spec", "swagger.json"))
	if err != nil {
		return err
	}
	var doc struct {
		Definitions map[string]map[string]any `json:"definitions"`
	}
	if err := json.Unmarshal(spec, &doc); err != nil {
		return fmt.Errorf("swagger.json: %w", err)
	}
	defs := map[string]any{}
	for name, def := range doc.Definitions {
		defs[name] = strictSchema(def)
	}
	if err := writeJSON(filepath.Join(dir, "_definitions.json"), map[string]any{"definitions": defs}); err != nil {
		return err
	}
	kinds := 0
	for name, def := range doc.Definitions {
		gvks, _ := def["x-kubernetes-group-version-kind"].([]any)
		if len(gvks) != 1 { // list and option types shared by every group: not top-level resources
			continue
		}
		gvk := gvks[0].(map[string]any)
		group, version, kind := gvk["group"].(string), gvk["version"].(string), gvk["kind"].(string)
		apiVersion := version
		if group != "" {
			apiVersion = group + "/" + version
		}
		// kubeconform's {{ .KindSuffix }}: the group's first label and the version.
		suffix := "-" + strings.ToLower(strings.Split(strings.Split(apiVersion, "/")[0], ".")[0])
		if group != "" {
			suffix += "-" + version
		}
		schema := map[string]any{
			"allOf": []any{map[string]any{"$ref": "_definitions.json#/definitions/" + name}},
			"properties": map[string]any{
				"apiVersion": map[string]any{"enum": []any{apiVersion}},
				"kind":       map[string]any{"enum": []any{kind}},
			},
			"required": []any{"apiVersion", "kind", "metadata"},
		}
		if err := writeJSON(filepath.Join(dir, strings.ToLower(kind)+suffix+".json"), schema); err != nil {
			return err
		}
		kinds++
	}
	if kinds < 50 {
		return fmt.Errorf("swagger.json: only %d kinds found", kinds)
	}
	return nil
}

// strictSchema rewrites one OpenAPI v2 schema as a draft-4 JSON schema that rejects unknown
// fields. Kubernetes' two string-or-number types accept what YAML makes of `port: 8080` and
// `cpu: 1`.
func strictSchema(s map[string]any) map[string]any {
	if s["format"] == "int-or-string" {
		return map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "integer"}}}
	}
	if ref, ok := s["$ref"].(string); ok {
		if ref == "#/definitions/io.k8s.apimachinery.pkg.api.resource.Quantity" {
			return map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "number"}}}
		}
		return map[string]any{"$ref": ref} // draft 4 ignores a $ref's siblings anyway
	}
	out := map[string]any{}
	for k, v := range s {
		switch k {
		case "properties":
			props := map[string]any{}
			for name, p := range v.(map[string]any) {
				props[name] = strictSchema(p.(map[string]any))
			}
			out[k] = props
		case "items":
			out[k] = strictSchema(v.(map[string]any))
		case "additionalProperties":
			if m, ok := v.(map[string]any); ok {
				v = strictSchema(m)
			}
			out[k] = v
		case "allOf", "anyOf", "oneOf":
			var list []any
			for _, e := range v.([]any) {
				list = append(list, strictSchema(e.(map[string]any)))
			}
			out[k] = list
		default:
			if !strings.HasPrefix(k, "x-") && k != "description" {
				out[k] = v
			}
		}
	}
	if _, ok := out["properties"]; ok && out["additionalProperties"] == nil && s["x-kubernetes-preserve-unknown-fields"] != true {
		out["additionalProperties"] = false
	}
	return out
}

func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// validate runs kubeconform over one YAML stream and returns a line per resource that is not
// valid, and how many were valid.
func validate(t *testing.T, name string, data []byte) (problems []string, valid int) {
	t.Helper()
	v, err := validator.New([]string{filepath.Join(schemaDir, "{{ .ResourceKind }}{{ .KindSuffix }}.json")},
		validator.Opts{Strict: true}) // Strict: a duplicated key is an error too
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range v.Validate(name, nopCloser{bytes.NewReader(data)}) {
		if r.Status == validator.Valid {
			valid++
			continue
		}
		sig, _ := r.Resource.Signature()
		line := fmt.Sprintf("%s: %v", name, r.Err)
		if sig != nil {
			line = fmt.Sprintf("%s: %s %s: %v", name, sig.Kind, sig.Name, r.Err)
		}
		for _, e := range r.ValidationErrors {
			line += fmt.Sprintf("\n\t%s: %s", e.Path, e.Msg)
		}
		problems = append(problems, line)
	}
	return problems, valid
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

func manifestFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests found: %v", err)
	}
	return files
}

// TestManifestsMatchSchema checks every resource of every manifest against the Kubernetes API.
func TestManifestsMatchSchema(t *testing.T) {
	for _, file := range manifestFiles(t) {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		problems, valid := validate(t, file, data)
		for _, p := range problems {
			t.Error(p)
		}
		if want := bytes.Count(data, []byte("\napiVersion:")) + btoi(bytes.HasPrefix(data, []byte("apiVersion:"))); valid != want {
			t.Errorf("%s: %d resources valid, want %d", file, valid, want)
		}
	}
}

// TestSchemaCheckRejects proves the check can fail: each case breaks the real manifest in one
// way that a cluster would refuse.
func TestSchemaCheckRejects(t *testing.T) {
	good, err := os.ReadFile("webhookd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, old, new string }{
		{"misspelled field", "readinessProbe:", "readinesProbe:"},
		{"misspelled nested field", "readOnlyRootFilesystem: true", "readOnlyRootFileSystem: true"},
		{"wrong type", "replicas: 2", "replicas: two"},
		{"removed API version", "apiVersion: policy/v1", "apiVersion: policy/v1beta1"},
		{"unknown kind", "kind: PodDisruptionBudget", "kind: PodDisruptionBugdet"},
		{"duplicate key", "revisionHistoryLimit: 5", "revisionHistoryLimit: 5\n  revisionHistoryLimit: 6"},
		{"missing required field", "  selector:\n    matchLabels: {app.kubernetes.io/name: webhookd, app.kubernetes.io/component: api}\n  template:",
			"  template:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !bytes.Contains(good, []byte(tc.old)) {
				t.Fatalf("webhookd.yaml has no %q to break", tc.old)
			}
			bad := bytes.Replace(good, []byte(tc.old), []byte(tc.new), 1)
			problems, _ := validate(t, "broken webhookd.yaml", bad)
			if len(problems) == 0 {
				t.Fatalf("the check accepted webhookd.yaml with %q replaced by %q", tc.old, tc.new)
			}
			t.Log(problems[0])
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// The parts of the resources that webhookd's own checks read.
type (
	resource struct {
		Kind     string                `json:"kind"`
		Metadata struct{ Name string } `json:"metadata"`
		Data     map[string]string     `json:"data"`
		Spec     struct {
			Replicas *int        `json:"replicas"`
			Template podTemplate `json:"template"`
		} `json:"spec"`
	}
	podTemplate struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
		Spec struct {
			TerminationGracePeriodSeconds *int        `json:"terminationGracePeriodSeconds"`
			Containers                    []container `json:"containers"`
		} `json:"spec"`
	}
	container struct {
		Name    string   `json:"name"`
		Args    []string `json:"args"`
		EnvFrom []struct {
			ConfigMapRef *struct {
				Name     string `json:"name"`
				Optional bool   `json:"optional"`
			} `json:"configMapRef"`
		} `json:"envFrom"`
		Env []struct {
			Name string `json:"name"`
		} `json:"env"`
		Ports []struct {
			ContainerPort int `json:"containerPort"`
		} `json:"ports"`
		StartupProbe, ReadinessProbe, LivenessProbe *probe
		Resources                                   struct {
			Requests map[string]any `json:"requests"`
			Limits   map[string]any `json:"limits"`
		} `json:"resources"`
		SecurityContext *struct {
			AllowPrivilegeEscalation *bool `json:"allowPrivilegeEscalation"`
			ReadOnlyRootFilesystem   *bool `json:"readOnlyRootFilesystem"`
			RunAsNonRoot             *bool `json:"runAsNonRoot"`
			Capabilities             *struct {
				Drop []string `json:"drop"`
			} `json:"capabilities"`
		} `json:"securityContext"`
	}
	probe struct {
		HTTPGet *struct {
			Path string `json:"path"`
		} `json:"httpGet"`
	}
)

func (p *probe) path() string {
	if p == nil || p.HTTPGet == nil {
		return ""
	}
	return p.HTTPGet.Path
}

func readResources(t *testing.T) []resource {
	t.Helper()
	var all []resource
	for _, file := range manifestFiles(t) {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(data), -1) {
			var r resource
			if err := yaml.Unmarshal([]byte(doc), &r); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if r.Kind != "" {
				all = append(all, r)
			}
		}
	}
	return all
}

// knownVariables reads the WEBHOOKD_ variables webhookd accepts from the env tags of Config in
// cmd/webhookd/config.go: any other stops the process at start.
func knownVariables(t *testing.T) []string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "..", "cmd", "webhookd", "config.go"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range regexp.MustCompile("`env:\"(WEBHOOKD_[A-Z_]+)\"").FindAllSubmatch(src, -1) {
		names = append(names, string(m[1]))
	}
	return names
}

// The Temporal client variables go.temporal.io/sdk/contrib/envconfig reads.
var temporalVariables = []string{
	"TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "TEMPORAL_API_KEY", "TEMPORAL_TLS",
	"TEMPORAL_TLS_CLIENT_CERT_PATH", "TEMPORAL_TLS_CLIENT_KEY_PATH", "TEMPORAL_TLS_SERVER_CA_CERT_PATH",
	"TEMPORAL_TLS_SERVER_NAME", "TEMPORAL_TLS_DISABLE_HOST_VERIFICATION", "TEMPORAL_PROFILE", "TEMPORAL_CONFIG_FILE",
}

// TestManifestsMatchWebhookd checks what the schema cannot: that the manifests fit what webhookd
// reads and serves.
func TestManifestsMatchWebhookd(t *testing.T) {
	known := knownVariables(t)
	if len(known) < 20 {
		t.Fatalf("read only %d variables from config.go", len(known))
	}
	checkName := func(where, name string) {
		switch {
		case strings.HasPrefix(name, "WEBHOOKD_") && !slices.Contains(known, name):
			t.Errorf("%s: %s is not a variable webhookd knows: the process would refuse to start", where, name)
		case strings.HasPrefix(name, "TEMPORAL_") && !slices.Contains(temporalVariables, name):
			t.Errorf("%s: %s is not a Temporal client variable", where, name)
		}
	}
	resources := readResources(t)
	configMaps := map[string]map[string]string{}
	for _, r := range resources {
		if r.Kind == "ConfigMap" {
			configMaps[r.Metadata.Name] = r.Data
			for k := range r.Data {
				checkName("ConfigMap "+r.Metadata.Name, k)
			}
		}
	}
	config := configMaps["webhookd"]
	if config == nil {
		t.Fatal("no ConfigMap webhookd")
	}
	_, port, err := net.SplitHostPort(config["WEBHOOKD_HTTP_ADDR"])
	if err != nil {
		t.Fatalf("ConfigMap webhookd: WEBHOOKD_HTTP_ADDR: %v", err)
	}
	deliveryTimeout, err := time.ParseDuration(config["WEBHOOKD_DELIVERY_TIMEOUT"])
	if err != nil {
		t.Fatalf("ConfigMap webhookd: WEBHOOKD_DELIVERY_TIMEOUT must be set, since the worker's grace period depends on it: %v", err)
	}

	roles := map[string]int{}
	for _, r := range resources {
		if r.Kind != "Deployment" && r.Kind != "Job" {
			continue
		}
		pod := r.Spec.Template
		for _, c := range pod.Spec.Containers {
			where := r.Kind + " " + r.Metadata.Name
			for _, e := range c.Env {
				checkName(where, e.Name)
			}
			for _, ef := range c.EnvFrom {
				if ef.ConfigMapRef != nil && configMaps[ef.ConfigMapRef.Name] == nil && !ef.ConfigMapRef.Optional {
					t.Errorf("%s: ConfigMap %s is defined nowhere", where, ef.ConfigMapRef.Name)
				}
			}
			sc := c.SecurityContext
			if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot ||
				sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []string{"ALL"}) {
				t.Errorf("%s: container %s must run as non-root, with a read-only root filesystem, no privilege escalation and every capability dropped", where, c.Name)
			}
			if c.Resources.Requests["cpu"] == nil || c.Resources.Requests["memory"] == nil || c.Resources.Limits["memory"] == nil {
				t.Errorf("%s: container %s needs cpu and memory requests and a memory limit", where, c.Name)
			}
			if r.Kind != "Deployment" {
				continue
			}
			role := ""
			if i := slices.Index(c.Args, "--role"); i >= 0 && i+1 < len(c.Args) && c.Args[0] == "serve" {
				role = c.Args[i+1]
			}
			roles[role]++
			if len(c.Ports) != 1 || strconv.Itoa(c.Ports[0].ContainerPort) != port || pod.Metadata.Annotations["prometheus.io/port"] != port {
				t.Errorf("%s: the container port and prometheus.io/port must be WEBHOOKD_HTTP_ADDR's port %s", where, port)
			}
			if pod.Metadata.Annotations["prometheus.io/scrape"] != "true" || pod.Metadata.Annotations["prometheus.io/path"] != "/metrics" {
				t.Errorf("%s: /metrics is not marked for scraping", where)
			}
			switch role {
			case "api": // api/server.go serves /healthz and /readyz
				if c.ReadinessProbe.path() != "/readyz" || c.LivenessProbe.path() != "/healthz" || c.StartupProbe.path() != "/healthz" {
					t.Errorf("%s: the API wants readiness on /readyz, startup and liveness on /healthz", where)
				}
			case "worker": // serve.go: a worker alone serves /healthz and /metrics only
				for _, p := range []*probe{c.StartupProbe, c.ReadinessProbe, c.LivenessProbe} {
					if p.path() != "/healthz" {
						t.Errorf("%s: a worker serves only /healthz to probes, not %q", where, p.path())
					}
				}
				if r.Spec.Replicas == nil || *r.Spec.Replicas < 2 {
					t.Errorf("%s: at least 2 worker replicas", where)
				}
				// serve.go: the worker drains for WEBHOOKD_DELIVERY_TIMEOUT + 5 s, the HTTP
				// server for up to 10 s.
				need := deliveryTimeout + 5*time.Second + 10*time.Second
				if g := pod.Spec.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= need {
					t.Errorf("%s: terminationGracePeriodSeconds must exceed %s", where, need)
				}
			default:
				t.Errorf("%s: args %q are not serve --role api|worker", where, c.Args)
			}
		}
	}
	if roles["api"] != 1 || roles["worker"] != 1 {
		t.Errorf("want one API and one worker Deployment, found %v", roles)
	}
}
