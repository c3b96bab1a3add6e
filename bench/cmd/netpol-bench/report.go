package main

import (
	"fmt"
	"slices"
	"time"
)

// phaseResult is one phase of one round.
type phaseResult struct {
	rows                 []row
	flaps, wrong, stalls int
	maxWrong             time.Duration
	notes                []string
	proberCPU            float64 // cores
	load                 string
}

type row struct {
	name    string
	sum     summary
	samples []time.Duration
}

func newRow(name string, ds []time.Duration, missing int) row {
	return row{name: name, sum: summarize(ds, missing), samples: ds}
}

// collect turns stream results into rows: one per kind, and one per group
// (the slowest of its probes of the kinds in groupKinds), first.
func (r *phaseResult) collect(ps []*probe, results map[string]settle, groupKinds map[string]bool, groupName string) {
	byKind := map[string][]time.Duration{}
	missing := map[string]int{}
	groupWorst := map[string]time.Duration{}
	groupMissing := map[string]bool{}
	var kinds []string
	for _, p := range ps {
		s := results[p.id]
		if !slices.Contains(kinds, p.kind) {
			kinds = append(kinds, p.kind)
		}
		r.flaps += s.flaps
		if s.wrong > 0 {
			r.wrong++
			r.maxWrong = max(r.maxWrong, s.wrong)
		}
		if !s.reached {
			missing[p.kind]++
			if groupKinds[p.kind] {
				groupMissing[p.group] = true
			}
			continue
		}
		d := s.at
		if p.kind == "control" {
			continue
		}
		byKind[p.kind] = append(byKind[p.kind], d)
		if groupKinds[p.kind] {
			if cur, ok := groupWorst[p.group]; !ok || d > cur {
				groupWorst[p.group] = d
			}
		}
	}
	var worst []time.Duration
	for g, d := range groupWorst {
		if !groupMissing[g] {
			worst = append(worst, d)
		}
	}
	r.rows = append(r.rows, newRow(groupName, worst, len(groupMissing)))
	for _, k := range kinds {
		if k == "control" {
			r.rows = append(r.rows, row{name: "control probes (must stay allowed): not allowed at the end", sum: summary{n: missing[k]}})
			continue
		}
		r.rows = append(r.rows, newRow("probes "+k, byKind[k], missing[k]))
	}
}

func report(e *env, title string, rs []phaseResult) {
	if len(rs) == 0 {
		return
	}
	e.printf("\n### %s\n\nPer round (ms):\n\n| round | load | prober CPU | flaps | streams wrong after right (longest) | prober stalls | row | %s |\n| --- | --- | --- | --- | --- | --- | --- |%s\n",
		title, summaryHeader, " --- | --- | --- | --- | --- | --- | --- |")
	for i, r := range rs {
		for j, rw := range r.rows {
			lead := "| | | | | | |"
			if j == 0 {
				lead = fmt.Sprintf("| %d | %s | %.2f | %d | %d (%s) | %d |", i+1, r.load, r.proberCPU, r.flaps, r.wrong, ms(r.maxWrong), r.stalls)
			}
			e.printf("%s %s | %s |\n", lead, rw.name, rw.sum.cells())
		}
	}
	for i, r := range rs {
		for _, n := range r.notes {
			e.printf("\nround %d: %s", i+1, n)
		}
	}
	e.printf("\n\nMedians over the %d rounds (ms):\n\n| row | n | not reached | min | p50 | p90 | p99 | max |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n", len(rs))
	for j, rw := range rs[0].rows {
		var n, miss []int
		var mn, p50, p90, p99, mx []time.Duration
		for _, r := range rs {
			if j >= len(r.rows) {
				continue
			}
			s := r.rows[j].sum
			n, miss = append(n, s.n), append(miss, s.missing)
			mn, p50, p90, p99, mx = append(mn, s.min), append(p50, s.p50), append(p90, s.p90), append(p99, s.p99), append(mx, s.max)
		}
		e.printf("| %s | %s | %s | %s | %s | %s | %s | %s |\n", rw.name, joinInts(n), joinInts(miss), ms(median(mn)), ms(median(p50)), ms(median(p90)), ms(median(p99)), ms(median(mx)))
	}
	e.printf("\nAll rounds pooled (ms):\n\n| row | %s |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n", summaryHeader)
	for j, rw := range rs[0].rows {
		var all []time.Duration
		missing := 0
		for _, r := range rs {
			if j < len(r.rows) {
				all = append(all, r.rows[j].samples...)
				missing += r.rows[j].sum.missing
			}
		}
		if len(all) > 0 {
			e.printf("| %s | %s |\n", rw.name, summarize(all, missing).cells())
		}
	}
}
