package main

// stage is a step of serve's way down. The stages run in the order declared here, whatever order
// serve built its parts in: this list is the one place that order is written.
type stage int

const (
	// endRun cancels the run's context: the worker begins to stop (its attempts in flight have
	// its stop timeout), the namespace check ends.
	endRun stage = iota
	// stopHTTP lets the requests in flight finish (bounded): they may start workflows and hand
	// their dispatch marks over.
	stopHTTP
	// stopWorker waits for the worker: its attempts in flight finish and are recorded.
	stopWorker
	// flushMarks writes the dispatch marks the requests handed over, to the database.
	flushMarks
	stopDebug
	// flushTraces exports the spans still queued once the worker and the API have stopped: every
	// span of an attempt or a start has ended then. It runs before the client closes, so that a
	// close that waits on Temporal neither delays the export past its deadline nor loses it.
	flushTraces
	// closeTemporal closes the client once nothing uses it: neither the API nor the worker.
	closeTemporal
	// closeDB closes the database last: the worker, the marks and the requests write to it.
	closeDB
	stages
)

// shutdown holds what ends each of serve's parts, by stage.
type shutdown struct {
	steps [stages][]func()
}

// at adds fn to stage st. Within a stage, the steps added last run first, as defers do.
func (s *shutdown) at(st stage, fn func()) { s.steps[st] = append(s.steps[st], fn) }

// run runs every step, stage by stage, each once: serve defers it, so that a part built before a
// failure at start is ended as at a stop.
func (s *shutdown) run() {
	for st := range s.steps {
		steps := s.steps[st]
		s.steps[st] = nil
		for i := len(steps) - 1; i >= 0; i-- {
			steps[i]()
		}
	}
}
