package temporaltest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/webhookd/webhookd/internal/repo"
)

// DynamicConfigFile, relative to the module root, is the Temporal server configuration webhookd
// relies on, one KEY=VALUE a line with VALUE in JSON: fairness dispatches each task queue
// round-robin across accounts (workflows.FairnessKey), so one account's backlog does not queue
// ahead of another's, and one partition per task queue, since fairness orders each partition on
// its own. It is the one definition: the tests' dev server and deployments/dev/temporal-dev.sh
// (make run, the benchmarks) take it as flags, and TestClusterDynamicConfigAgrees checks that make
// cluster's deployments/cluster/dynamicconfig.yaml sets the same values.
const DynamicConfigFile = "deployments/dev/dynamicconfig.txt"

// DynamicConfig reads DynamicConfigFile: each key with its value, in JSON.
func DynamicConfig() (map[string]string, error) {
	root, err := repo.Root()
	if err != nil {
		return nil, fmt.Errorf("%w to find %s in", err, DynamicConfigFile)
	}
	path := filepath.Join(root, DynamicConfigFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	config, err := parseDynamicConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return config, nil
}

// parseDynamicConfig reads the file as temporal-dev.sh does: blank lines and lines starting with #
// are skipped, every other line is KEY=VALUE. It refuses what the dev server would refuse or take
// differently: no key, a value that is not JSON, a key twice.
func parseDynamicConfig(data []byte) (map[string]string, error) {
	config := map[string]string{}
	lines := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; lines.Scan(); n++ {
		line := strings.TrimSpace(lines.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok || key == "" || strings.ContainsAny(key, " \t") {
			return nil, fmt.Errorf("line %d: %q is not KEY=VALUE", n, line)
		}
		if !json.Valid([]byte(value)) {
			return nil, fmt.Errorf("line %d: the value of %s, %q, is not JSON", n, key, value)
		}
		if _, twice := config[key]; twice {
			return nil, fmt.Errorf("line %d: %s is set twice", n, key)
		}
		config[key] = value
	}
	if err := lines.Err(); err != nil {
		return nil, err
	}
	if len(config) == 0 {
		return nil, fmt.Errorf("no KEY=VALUE line")
	}
	return config, nil
}

// dynamicConfigFlags is DynamicConfig as `temporal server start-dev` flags.
func dynamicConfigFlags() ([]string, error) {
	config, err := DynamicConfig()
	if err != nil {
		return nil, err
	}
	var flags []string
	for _, key := range slices.Sorted(maps.Keys(config)) {
		flags = append(flags, "--dynamic-config-value", key+"="+config[key])
	}
	return flags, nil
}
