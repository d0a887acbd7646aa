// Command testreport reads `go test -json` on standard input and prints what a plain `go test`
// prints (each package's result, and the whole output of a test that failed), then the slowest
// tests, so that a run of the system tests says where its time went. It exits 1 when a test, a
// package or a build failed, or when it read no result at all.
//
//	go test -json -tags e2e ./e2e/ | go run ./internal/testreport -slowest 20
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

type result struct {
	name    string
	elapsed time.Duration
}

func main() {
	slowest := flag.Int("slowest", 20, "how many of the slowest top-level tests to list")
	flag.Parse()
	failed, results, err := report(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(1)
	}
	slices.SortFunc(results, func(a, b result) int { return int(b.elapsed - a.elapsed) })
	var total time.Duration
	for _, r := range results {
		total += r.elapsed
	}
	fmt.Printf("\nthe %d slowest of %d tests (%s in all):\n", min(*slowest, len(results)), len(results), total.Round(time.Second))
	for _, r := range results[:min(*slowest, len(results))] {
		fmt.Printf("  %8s  %s\n", r.elapsed.Round(100*time.Millisecond), r.name)
	}
	if failed {
		os.Exit(1)
	}
}

// report copies what a plain `go test` would print from the events on in to out, and returns
// whether anything failed and the elapsed time of each top-level test that ended.
func report(in io.Reader, out io.Writer) (failed bool, results []result, err error) {
	output := map[string][]string{} // a test's output, kept until it ends
	packages := 0
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if json.Unmarshal(line, &e) != nil {
			fmt.Fprintln(out, string(line)) // not an event: a build error printed as text
			continue
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "output", "build-output":
			if e.Test == "" {
				// A package's own lines: its result ("ok", "FAIL", "--- FAIL" of a panic) and what
				// its TestMain printed. The per-test "=== RUN" and "--- PASS" lines are left out.
				if !strings.HasPrefix(e.Output, "=== ") && !strings.HasPrefix(e.Output, "PASS") {
					fmt.Fprint(out, e.Output)
				}
				continue
			}
			output[key] = append(output[key], e.Output)
		case "pass", "skip":
			if e.Test != "" && !strings.Contains(e.Test, "/") && e.Action == "pass" {
				results = append(results, result{e.Package + "." + e.Test, time.Duration(e.Elapsed * float64(time.Second))})
			}
			delete(output, key)
			if e.Test == "" {
				packages++
			}
		case "fail", "build-fail":
			failed = true
			if e.Test != "" {
				fmt.Fprint(out, strings.Join(output[key], ""))
				delete(output, key)
				if !strings.Contains(e.Test, "/") {
					results = append(results, result{e.Package + "." + e.Test + " (FAILED)", time.Duration(e.Elapsed * float64(time.Second))})
				}
			} else {
				packages++
			}
		}
	}
	if err := sc.Err(); err != nil {
		return true, results, err
	}
	// A test still running when the stream ended (a panic, a timeout) printed its output here.
	for _, lines := range output {
		fmt.Fprint(out, strings.Join(lines, ""))
	}
	if packages == 0 {
		return true, results, fmt.Errorf("no package result in the input")
	}
	return failed, results, nil
}
