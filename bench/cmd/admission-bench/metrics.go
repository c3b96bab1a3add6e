package main

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// families are the metric families of one scrape, by name.
type families map[string]*dto.MetricFamily

// parseMetrics reads the families named in names from a /metrics text;
// the API server's is large, so the other lines are dropped first.
func parseMetrics(text []byte, names ...string) (families, error) {
	var kept bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		name := string(line)
		if rest, ok := strings.CutPrefix(name, "# HELP "); ok {
			name = rest
		} else if rest, ok := strings.CutPrefix(name, "# TYPE "); ok {
			name = rest
		}
		if i := strings.IndexAny(name, "{ "); i >= 0 {
			name = name[:i]
		}
		for _, n := range names {
			if name == n || name == n+"_bucket" || name == n+"_sum" || name == n+"_count" {
				kept.Write(line)
				kept.WriteByte('\n')
				break
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(&kept)
	if err != nil {
		return nil, fmt.Errorf("parsing metrics: %w", err)
	}
	return fams, nil
}

// labels is a selection of series by label values.
type labels map[string]string

func (l labels) match(m *dto.Metric) bool {
	for k, v := range l {
		found := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == k {
				found = lp.GetValue() == v
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// histogram is a Prometheus histogram (cumulative buckets), or the sum of
// several series of one.
type histogram struct {
	count, sum float64
	bounds     []float64
	cumulative []float64
}

// histogram sums the series of family name that sel selects. A summary
// gives its count and sum.
func (f families) histogram(name string, sel labels) histogram {
	var h histogram
	fam, ok := f[name]
	if !ok {
		return h
	}
	for _, m := range fam.GetMetric() {
		if !sel.match(m) {
			continue
		}
		if s := m.GetSummary(); s != nil {
			h.count += float64(s.GetSampleCount())
			h.sum += s.GetSampleSum()
			continue
		}
		hm := m.GetHistogram()
		if hm == nil {
			continue
		}
		h.count += float64(hm.GetSampleCount())
		h.sum += hm.GetSampleSum()
		if h.bounds == nil {
			for _, b := range hm.GetBucket() {
				h.bounds = append(h.bounds, b.GetUpperBound())
			}
			h.cumulative = make([]float64, len(h.bounds))
		}
		for i, b := range hm.GetBucket() {
			if i < len(h.cumulative) {
				h.cumulative[i] += float64(b.GetCumulativeCount())
			}
		}
	}
	return h
}

// since is what h observed after before.
func (h histogram) since(before histogram) histogram {
	out := histogram{count: h.count - before.count, sum: h.sum - before.sum, bounds: h.bounds}
	out.cumulative = make([]float64, len(h.cumulative))
	for i := range h.cumulative {
		out.cumulative[i] = h.cumulative[i]
		if i < len(before.cumulative) {
			out.cumulative[i] -= before.cumulative[i]
		}
	}
	return out
}

func (h histogram) mean() time.Duration {
	if h.count == 0 {
		return 0
	}
	return seconds(h.sum / h.count)
}

// quantile interpolates the q-quantile linearly within its bucket, as
// Prometheus's histogram_quantile does; with coarse buckets it says
// little, see bound.
func (h histogram) quantile(q float64) time.Duration {
	if h.count == 0 {
		return 0
	}
	rank := q * h.count
	lower, below := 0.0, 0.0
	for i, b := range h.bounds {
		if h.cumulative[i] >= rank {
			if math.IsInf(b, 1) {
				return seconds(lower)
			}
			in := h.cumulative[i] - below
			if in == 0 {
				return seconds(b)
			}
			return seconds(lower + (b-lower)*(rank-below)/in)
		}
		lower, below = b, h.cumulative[i]
	}
	return seconds(lower)
}

// bound names the bucket the q-quantile falls in: "≤ 5 ms" when it is at
// most the first bound, and so on, and "> 25 ms" beyond the last finite
// one.
func (h histogram) bound(q float64) string {
	if h.count == 0 {
		return "—"
	}
	rank := q * h.count
	last := math.NaN()
	for i, b := range h.bounds {
		if math.IsInf(b, 1) {
			break
		}
		if h.cumulative[i] >= rank {
			return "≤ " + short(seconds(b))
		}
		last = b
	}
	if math.IsNaN(last) {
		return "—"
	}
	return "> " + short(seconds(last))
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// short prints a bucket bound: 5 ms, 25 ms, 2.5 s.
func short(d time.Duration) string {
	if d >= time.Second {
		return fmt.Sprintf("%g s", d.Seconds())
	}
	return fmt.Sprintf("%g ms", float64(d)/float64(time.Millisecond))
}
