package temporaltest

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/internal/repo"
	"go.yaml.in/yaml/v3"
)

// clusterDynamicConfig is make cluster's dynamic config, relative to the module root.
const clusterDynamicConfig = "deployments/cluster/dynamicconfig.yaml"

// clusterOnly lists the keys that make cluster's server sets and the dev server does not, each with
// why. None today: the two run with the same configuration.
var clusterOnly = map[string]string{
	// deployments/dev/temporal-dev.sh sets these two on the dev server it starts for make run and the
	// benchmarks; the tests' dev server keeps the defaults, so that a workflow they start shows in
	// visibility at once.
	"history.visibilityProcessorMaxPollRPS": "fewer visibility writes per delivery (issue 45); make run sets it in temporal-dev.sh",
	"history.visibilityTaskBatchSize":       "the batch that goes with history.visibilityProcessorMaxPollRPS",
}

// TestClusterDynamicConfigAgrees: make cluster's dynamicconfig.yaml sets every key of
// DynamicConfigFile to the same value, for every namespace, and no key of its own that clusterOnly
// does not explain. With temporal-dev.sh and the tests' dev server both reading DynamicConfigFile,
// this is what keeps the three from drifting apart.
func TestClusterDynamicConfigAgrees(t *testing.T) {
	dev, err := DynamicConfig()
	if err != nil {
		t.Fatal(err)
	}
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := os.ReadFile(filepath.Join(root, clusterDynamicConfig))
	if err != nil {
		t.Fatal(err)
	}
	differences, err := clusterDisagreements(dev, cluster)
	if err != nil {
		t.Fatalf("%s: %v", clusterDynamicConfig, err)
	}
	for _, d := range differences {
		t.Errorf("%s and %s differ: %s", DynamicConfigFile, clusterDynamicConfig, d)
	}
}

// TestClusterDisagreementsAreFound is the negative control of TestClusterDynamicConfigAgrees: each
// way the cluster's file can drift is reported.
func TestClusterDisagreementsAreFound(t *testing.T) {
	dev := map[string]string{"a.flag": "true", "b.count": "1", "c.name": `"x"`}
	for _, tc := range []struct {
		name, cluster string
		want          []string
	}{
		{"agrees", "a.flag:\n  - value: true\nb.count:\n  - value: 1\nc.name:\n  - value: x\n", nil},
		{"another value", "a.flag:\n  - value: false\nb.count:\n  - value: 4\nc.name:\n  - value: x\n",
			[]string{"a.flag is false in the cluster, true on the dev server", "b.count is 4 in the cluster, 1 on the dev server"}},
		{"missing", "a.flag:\n  - value: true\nc.name:\n  - value: x\n", []string{"b.count=1 is not set in the cluster"}},
		{"constrained", "a.flag:\n  - value: true\nb.count:\n  - value: 1\n    constraints: {namespace: webhookd}\nc.name:\n  - value: x\n",
			[]string{"b.count has constraints or several values in the cluster"}},
		{"cluster only", "a.flag:\n  - value: true\nb.count:\n  - value: 1\nc.name:\n  - value: x\nd.extra:\n  - value: 2\n",
			[]string{"d.extra is set in the cluster only: add it to " + DynamicConfigFile + ", or to clusterOnly with why"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := clusterDisagreements(dev, []byte(tc.cluster))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("disagreements = %q, want %q", got, tc.want)
			}
		})
	}
}

// clusterDisagreements compares DynamicConfig's values with a Temporal server dynamic config file.
func clusterDisagreements(dev map[string]string, clusterYAML []byte) ([]string, error) {
	var cluster map[string][]struct {
		Value       any            `yaml:"value"`
		Constraints map[string]any `yaml:"constraints"`
	}
	if err := yaml.Unmarshal(clusterYAML, &cluster); err != nil {
		return nil, err
	}
	var out []string
	for _, key := range slices.Sorted(maps.Keys(dev)) {
		values, ok := cluster[key]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s=%s is not set in the cluster", key, dev[key]))
			continue
		case len(values) != 1 || len(values[0].Constraints) != 0:
			out = append(out, key+" has constraints or several values in the cluster")
			continue
		}
		var want any
		if err := json.Unmarshal([]byte(dev[key]), &want); err != nil {
			return nil, err
		}
		// Through JSON, so that YAML's 1 (an int) equals JSON's 1 (a float64).
		raw, err := json.Marshal(values[0].Value)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		var got any
		if err := json.Unmarshal(raw, &got); err != nil {
			return nil, err
		}
		if !reflect.DeepEqual(got, want) {
			out = append(out, fmt.Sprintf("%s is %s in the cluster, %s on the dev server", key, raw, dev[key]))
		}
	}
	for _, key := range slices.Sorted(maps.Keys(cluster)) {
		if _, ok := dev[key]; !ok && clusterOnly[key] == "" {
			out = append(out, key+" is set in the cluster only: add it to "+DynamicConfigFile+", or to clusterOnly with why")
		}
	}
	return out, nil
}

func TestParseDynamicConfig(t *testing.T) {
	got, err := parseDynamicConfig([]byte("# comment\n\n  a.flag=true  \nb.list=[1, 2]\nc.name=\"x=y\""))
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"a.flag": "true", "b.list": "[1, 2]", "c.name": `"x=y"`}; !reflect.DeepEqual(got, want) {
		t.Errorf("parsed %q, want %q", got, want)
	}
	for _, bad := range []struct{ data, want string }{
		{"a.flag true\n", `line 1: "a.flag true" is not KEY=VALUE`},
		{"=true\n", `line 1: "=true" is not KEY=VALUE`},
		{"# only\na b=1\n", `line 2: "a b=1" is not KEY=VALUE`},
		{"a.name=x\n", `line 1: the value of a.name, "x", is not JSON`},
		{"a.flag=true\na.flag=false\n", "line 2: a.flag is set twice"},
		{"# nothing\n\n", "no KEY=VALUE line"},
	} {
		_, err := parseDynamicConfig([]byte(bad.data))
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("parse %q: error %v, want %q", bad.data, err, bad.want)
		}
	}
}
