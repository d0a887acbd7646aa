package main

import (
	"context"
	"fmt"
	"time"
)

// idle measures what the stack's processes spend with nothing to do, over cfg.duration (issue 45:
// a benchmark of 1,000 deliveries at 60 a second lasts 17 s, and what the servers spend idle in
// that time is part of their CPU per delivery). It prints each process's share of one core.
func idle(ctx context.Context, cfg config) error {
	procs := serverProcesses(cfg)
	if len(procs) == 0 {
		return fmt.Errorf("idle: give the processes to watch (-pid, -api-pids, -worker-pids, -temporal-pid, -postgres-pid)")
	}
	fmt.Printf("idle: the stack's CPU over %s with no load\n", cfg.duration)
	m := startCPUMeter(procs, 0)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(cfg.duration):
	}
	w := m.window("idle", 0)
	fmt.Printf("\n| process | share of one core, idle |\n|---|---|\n")
	for _, name := range w.spent.names {
		fmt.Printf("| %s | %s |\n", name, w.of(name))
	}
	fmt.Printf("| all | %s |\n", w.all())
	return nil
}
