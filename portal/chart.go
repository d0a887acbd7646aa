package portal

import (
	"fmt"
	"html"
	"html/template"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/webhookd/webhookd/model"
)

// The chart's geometry, in viewBox units: the SVG scales to its container's width and keeps this
// aspect ratio.
const (
	chartWidth       = 720
	chartHeight      = 240
	chartLeft        = 48 // room for the y labels
	chartRight       = 12
	chartTop         = 34 // room for the legend
	chartBottom      = 30 // room for the x labels
	chartPlotWidth   = chartWidth - chartLeft - chartRight
	chartPlotHeight  = chartHeight - chartTop - chartBottom
	chartPlotBottom  = chartTop + chartPlotHeight
	chartMaxXLabels  = 8
	chartBarFraction = 0.8 // of an hour's slot; the rest is the gap between bars
)

// chartSeries is one stacked part of a bar, bottom first: its name, class and colour.
var chartSeries = []struct {
	name, class, fill string
	count             func(model.HourBucket) int
}{
	{"delivered", "chart-delivered", "#2e7d32", func(b model.HourBucket) int { return b.Delivered }},
	{"retried", "chart-retried", "#f0a000", func(b model.HourBucket) int { return b.Retried }},
	{"failed", "chart-failed", "#c62828", func(b model.HourBucket) int { return b.Failed }},
}

// ChartSVG draws buckets (consecutive UTC hours, as model.EndpointHourly returns them) as an SVG bar
// chart: one bar per hour stacking delivered, retried and failed attempts, a legend, the maximum
// labelled on the y axis, and hour or day labels on the x axis. Every hour's bar has a <title>
// (a tooltip, and text for screen readers) with its counts; the whole has an aria-label that sums
// the period up and names the first hour with a failure.
//
// The markup is ours and built from numbers; title, the one string from outside, is escaped. It
// holds no script, event handler, style attribute or external reference, so the portal's
// Content-Security-Policy admits it inline, and html/template may embed it as template.HTML.
func ChartSVG(buckets []model.HourBucket, title string) template.HTML {
	var b strings.Builder
	summary := chartSummary(buckets)
	esc := html.EscapeString
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 %d %d" width="100%%" role="img" aria-label="%s" font-family="sans-serif" font-size="11">`,
		chartWidth, chartHeight, esc(title+": "+summary))
	fmt.Fprintf(&b, `<title>%s</title><desc>%s</desc>`, esc(title), esc(summary))

	// Legend, top right.
	x := chartWidth - chartRight - 3*90
	for _, s := range chartSeries {
		fmt.Fprintf(&b, `<rect class="chart-legend %s" x="%d" y="10" width="10" height="10" fill="%s"/><text x="%d" y="19" fill="#333">%s</text>`,
			s.class, x, s.fill, x+14, strings.ToUpper(s.name[:1])+s.name[1:])
		x += 90
	}
	// Plot frame: the x axis, and the y axis's zero.
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#999" stroke-width="1"/>`, chartLeft, chartPlotBottom, chartWidth-chartRight, chartPlotBottom)
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end" fill="#555">0</text>`, chartLeft-6, chartPlotBottom+4)

	maxTotal := 0
	for _, bk := range buckets {
		maxTotal = max(maxTotal, bk.Total())
	}
	if maxTotal == 0 {
		fmt.Fprintf(&b, `<text class="chart-empty" x="%d" y="%d" text-anchor="middle" fill="#555" font-size="14">No deliveries in this period</text>`,
			chartLeft+chartPlotWidth/2, chartTop+chartPlotHeight/2)
	} else {
		// The maximum, labelled, with a gridline at its height.
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#ddd" stroke-width="1" stroke-dasharray="4 3"/>`, chartLeft, chartTop, chartWidth-chartRight, chartTop)
		fmt.Fprintf(&b, `<text class="chart-max" x="%d" y="%d" text-anchor="end" fill="#555">%d</text>`, chartLeft-6, chartTop+4, maxTotal)
		slot := float64(chartPlotWidth) / float64(len(buckets))
		barWidth := slot * chartBarFraction
		for i, bk := range buckets {
			if bk.Total() == 0 {
				continue
			}
			x := float64(chartLeft) + float64(i)*slot + (slot-barWidth)/2
			y := float64(chartPlotBottom)
			fmt.Fprintf(&b, `<g class="chart-bar"><title>%s</title>`, esc(chartBarLabel(bk)))
			for _, s := range chartSeries {
				n := s.count(bk)
				if n == 0 {
					continue
				}
				h := float64(n) * chartPlotHeight / float64(maxTotal)
				y -= h
				fmt.Fprintf(&b, `<rect class="%s" x="%s" y="%s" width="%s" height="%s" fill="%s"/>`,
					s.class, chartNum(x), chartNum(y), chartNum(barWidth), chartNum(h), s.fill)
			}
			b.WriteString(`</g>`)
		}
	}
	chartXLabels(&b, buckets)
	b.WriteString(`</svg>`)
	// The markup is built above from numbers and escaped text only.
	return template.HTML(b.String())
}

// chartXLabels writes the hour labels under the bars: every few hours for a day ("15:00"), at each
// midnight for longer periods ("Nov 24"), at most chartMaxXLabels of them, and the time zone.
func chartXLabels(b *strings.Builder, buckets []model.HourBucket) {
	if len(buckets) == 0 {
		return
	}
	step := 24
	for _, s := range []int{1, 2, 3, 4, 6, 12} {
		if len(buckets)/s <= chartMaxXLabels {
			step = s
			break
		}
	}
	layout := "15:04"
	if step == 24 {
		layout = "Jan 2"
		// Every few days when a day each would not fit.
		for days := 1; ; days++ {
			if len(buckets)/(24*days) <= chartMaxXLabels {
				step = 24 * days
				break
			}
		}
	}
	slot := float64(chartPlotWidth) / float64(len(buckets))
	for i, bk := range buckets {
		h := bk.Hour.UTC()
		if (h.Hour()+24*h.YearDay())%step != 0 {
			continue
		}
		x := float64(chartLeft) + float64(i)*slot
		fmt.Fprintf(b, `<line x1="%s" y1="%d" x2="%s" y2="%d" stroke="#999" stroke-width="1"/>`, chartNum(x), chartPlotBottom, chartNum(x), chartPlotBottom+4)
		fmt.Fprintf(b, `<text class="chart-xlabel" x="%s" y="%d" text-anchor="middle" fill="#555">%s</text>`, chartNum(x), chartPlotBottom+16, h.Format(layout))
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="end" fill="#777" font-size="10">UTC</text>`, chartWidth-chartRight, chartHeight-2)
}

// chartBarLabel is one hour's tooltip.
func chartBarLabel(bk model.HourBucket) string {
	return fmt.Sprintf("%s UTC: %d delivered, %d retried, %d failed", bk.Hour.UTC().Format("2006-01-02 15:04"), bk.Delivered, bk.Retried, bk.Failed)
}

// chartSummary sums the period up in words, for the aria-label and <desc>.
func chartSummary(buckets []model.HourBucket) string {
	if len(buckets) == 0 {
		return "no deliveries"
	}
	var total model.HourBucket
	var firstFailure *time.Time
	for _, bk := range buckets {
		total.Delivered += bk.Delivered
		total.Retried += bk.Retried
		total.Failed += bk.Failed
		if firstFailure == nil && bk.Retried+bk.Failed > 0 {
			h := bk.Hour
			firstFailure = &h
		}
	}
	from := buckets[0].Hour.UTC().Format("2006-01-02 15:04")
	if total.Total() == 0 {
		return fmt.Sprintf("no deliveries in the %d hours from %s UTC", len(buckets), from)
	}
	s := fmt.Sprintf("%d hours from %s UTC: %d delivered, %d retried, %d failed", len(buckets), from, total.Delivered, total.Retried, total.Failed)
	if firstFailure != nil {
		s += "; first failed attempt in the hour of " + firstFailure.UTC().Format("2006-01-02 15:04") + " UTC"
	}
	return s
}

// chartNum writes a coordinate with at most two decimals.
func chartNum(f float64) string {
	return strconv.FormatFloat(math.Round(f*100)/100, 'f', -1, 64)
}
