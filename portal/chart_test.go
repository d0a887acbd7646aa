package portal

import (
	"encoding/xml"
	"errors"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/model"
)

// chartElement is one element of a parsed chart, with its attributes and the text directly in it.
type chartElement struct {
	name  string
	attrs map[string]string
	text  string
}

// chartParse parses svg as strict XML and returns its elements in document order.
func chartParse(t *testing.T, svg string) []*chartElement {
	t.Helper()
	dec := xml.NewDecoder(strings.NewReader(svg))
	dec.Strict = true
	var all, open []*chartElement
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the chart is not well-formed XML: %v\n%s", err, svg)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			el := &chartElement{name: tok.Name.Local, attrs: map[string]string{}}
			for _, a := range tok.Attr {
				name := a.Name.Local
				if a.Name.Space != "" && a.Name.Space != "http://www.w3.org/2000/svg" {
					name = a.Name.Space + ":" + name
				}
				el.attrs[name] = a.Value
			}
			all, open = append(all, el), append(open, el)
		case xml.EndElement:
			open = open[:len(open)-1]
		case xml.CharData:
			if len(open) > 0 {
				open[len(open)-1].text += string(tok)
			}
		}
	}
	if len(all) == 0 || all[0].name != "svg" {
		t.Fatalf("the chart is not an <svg>:\n%s", svg)
	}
	return all
}

// chartFind returns the elements named name whose class list holds class.
func chartFind(els []*chartElement, name, class string) []*chartElement {
	var out []*chartElement
	for _, el := range els {
		if el.name == name && (class == "" || strings.Contains(" "+el.attrs["class"]+" ", " "+class+" ")) {
			out = append(out, el)
		}
	}
	return out
}

func chartAttr(t *testing.T, el *chartElement, name string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(el.attrs[name], 64)
	if err != nil {
		t.Fatalf("<%s> %s=%q: %v", el.name, name, el.attrs[name], err)
	}
	return f
}

func chartHours(start time.Time, n int) []model.HourBucket {
	b := make([]model.HourBucket, n)
	for i := range b {
		b[i].Hour = start.Add(time.Duration(i) * time.Hour)
	}
	return b
}

var chartStart = time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)

// chartSafe fails when svg holds anything the portal's CSP or escaping forbids: script, event
// handlers, style attributes, links and external references. The text checks assume a title
// without markup; chartSafeElements alone checks the parsed structure.
func chartSafe(t *testing.T, svg string, els []*chartElement) {
	t.Helper()
	chartSafeElements(t, els)
	lower := strings.ToLower(svg)
	for _, bad := range []string{"<script", "style=", "href", "url(", "javascript:", "<foreignobject", "<image", "<use"} {
		if strings.Contains(lower, bad) {
			t.Errorf("the chart holds %q:\n%s", bad, svg)
		}
	}
	if regexp.MustCompile(`(?i)\son[a-z]+\s*=`).MatchString(svg) {
		t.Errorf("the chart holds an event handler attribute:\n%s", svg)
	}
}

func chartSafeElements(t *testing.T, els []*chartElement) {
	t.Helper()
	for _, el := range els {
		if el.name == "script" || el.name == "style" {
			t.Errorf("the chart holds a <%s> element", el.name)
		}
		for name := range el.attrs {
			if l := strings.ToLower(name); strings.HasPrefix(l, "on") || l == "style" || strings.HasSuffix(l, "href") {
				t.Errorf("<%s> has attribute %s", el.name, name)
			}
			// Only the namespace names a URL; the label is text (it may hold the endpoint's URL).
			if v := strings.ToLower(el.attrs[name]); name != "xmlns" && name != "aria-label" && (strings.Contains(v, ":") || strings.Contains(v, "url(")) {
				t.Errorf("<%s> %s=%q refers to something", el.name, name, v)
			}
		}
	}
}

// TestChartBarsProportional: each hour's bar stacks delivered, retried and failed from the bottom,
// with heights proportional to the counts, the tallest bar filling the plot and its total labelled.
func TestChartBarsProportional(t *testing.T) {
	buckets := chartHours(chartStart, 24)
	buckets[0].Delivered = 10
	buckets[1].Delivered = 5
	buckets[2] = model.HourBucket{Hour: buckets[2].Hour, Delivered: 2, Retried: 3, Failed: 5}
	buckets[5].Failed = 1
	svg := string(ChartSVG(buckets, "https://r.example.com/hook"))
	els := chartParse(t, svg)
	chartSafe(t, svg, els)

	root := els[0]
	if root.attrs["viewBox"] != "0 0 720 240" || root.attrs["role"] != "img" || !strings.HasPrefix(root.attrs["aria-label"], "https://r.example.com/hook: ") {
		t.Fatalf("<svg> attributes = %v", root.attrs)
	}
	if !strings.Contains(root.attrs["aria-label"], "24 hours from 2026-11-24 00:00 UTC: 17 delivered, 3 retried, 6 failed; first failed attempt in the hour of 2026-11-24 02:00 UTC") {
		t.Errorf("aria-label = %q", root.attrs["aria-label"])
	}
	if m := chartFind(els, "text", "chart-max"); len(m) != 1 || m[0].text != "10" {
		t.Fatalf("max label = %+v, want one saying 10", m)
	}
	bars := chartFind(els, "g", "chart-bar")
	if len(bars) != 4 {
		t.Fatalf("%d bars, want 4 (hours without attempts have none)", len(bars))
	}
	const eps = 0.011 // coordinates carry two decimals
	height := func(el *chartElement) float64 { return chartAttr(t, el, "height") }
	delivered := chartFind(els, "rect", "chart-delivered")[1:] // [0] is the legend's
	retried := chartFind(els, "rect", "chart-retried")[1:]
	failed := chartFind(els, "rect", "chart-failed")[1:]
	if len(delivered) != 3 || len(retried) != 1 || len(failed) != 2 {
		t.Fatalf("rects: %d delivered, %d retried, %d failed; want 3, 1, 2", len(delivered), len(retried), len(failed))
	}
	for _, c := range []struct {
		name string
		el   *chartElement
		want float64
	}{
		{"hour 0 delivered (the max)", delivered[0], chartPlotHeight},
		{"hour 1 delivered", delivered[1], chartPlotHeight / 2.0},
		{"hour 2 delivered", delivered[2], chartPlotHeight * 2 / 10.0},
		{"hour 2 retried", retried[0], chartPlotHeight * 3 / 10.0},
		{"hour 2 failed", failed[0], chartPlotHeight * 5 / 10.0},
		{"hour 5 failed", failed[1], chartPlotHeight / 10.0},
	} {
		if got := height(c.el); math.Abs(got-c.want) > eps {
			t.Errorf("%s: height %v, want %v", c.name, got, c.want)
		}
	}
	// Stacked: delivered on the axis, retried on delivered, failed on retried.
	y := func(el *chartElement) float64 { return chartAttr(t, el, "y") }
	if bottom := y(delivered[2]) + height(delivered[2]); math.Abs(bottom-chartPlotBottom) > eps {
		t.Errorf("hour 2's delivered ends at %v, want the axis at %v", bottom, chartPlotBottom)
	}
	if math.Abs(y(retried[0])+height(retried[0])-y(delivered[2])) > eps || math.Abs(y(failed[0])+height(failed[0])-y(retried[0])) > eps {
		t.Errorf("hour 2's parts are not stacked: delivered y %v, retried y %v h %v, failed y %v h %v",
			y(delivered[2]), y(retried[0]), height(retried[0]), y(failed[0]), height(failed[0]))
	}
	// Bars sit in their hour's slot, left to right, and say their counts.
	if x0, x5 := chartAttr(t, delivered[0], "x"), chartAttr(t, failed[1], "x"); math.Abs((x5-x0)-5*chartPlotWidth/24.0) > eps {
		t.Errorf("hour 5's bar is %v right of hour 0's, want %v", x5-x0, 5*chartPlotWidth/24.0)
	}
	if bars[2].text != "" || !strings.Contains(svg, `<g class="chart-bar"><title>2026-11-24 02:00 UTC: 2 delivered, 3 retried, 5 failed</title>`) {
		t.Errorf("hour 2's tooltip is missing:\n%s", svg)
	}
	// Distinct colours and a legend naming them.
	fills := map[string]bool{delivered[0].attrs["fill"]: true, retried[0].attrs["fill"]: true, failed[0].attrs["fill"]: true}
	if len(fills) != 3 {
		t.Errorf("the three parts share colours: %v", fills)
	}
	var legend []string
	for _, el := range chartFind(els, "text", "") {
		if el.text == "Delivered" || el.text == "Retried" || el.text == "Failed" {
			legend = append(legend, el.text)
		}
	}
	if strings.Join(legend, ",") != "Delivered,Retried,Failed" {
		t.Errorf("legend = %v", legend)
	}
}

// TestChartXLabels: a day is labelled every three hours, a week at each midnight, in UTC.
func TestChartXLabels(t *testing.T) {
	for _, c := range []struct {
		n    int
		want string
	}{
		{24, "00:00 03:00 06:00 09:00 12:00 15:00 18:00 21:00"},
		{7 * 24, "Nov 24 Nov 25 Nov 26 Nov 27 Nov 28 Nov 29 Nov 30"},
		{31 * 24, "Nov 24 Nov 28 Dec 2 Dec 6 Dec 10 Dec 14 Dec 18 Dec 22"},
	} {
		buckets := chartHours(chartStart, c.n)
		buckets[c.n-1].Delivered = 1
		els := chartParse(t, string(ChartSVG(buckets, "x")))
		var labels []string
		for _, el := range chartFind(els, "text", "chart-xlabel") {
			labels = append(labels, el.text)
		}
		if got := strings.Join(labels, " "); got != c.want {
			t.Errorf("%d hours: labels %q, want %q", c.n, got, c.want)
		}
	}
}

// TestChartEmpty: no attempts, or no hours at all, draw a chart that says so and has no bars.
func TestChartEmpty(t *testing.T) {
	for name, buckets := range map[string][]model.HourBucket{"quiet hours": chartHours(chartStart, 24), "no hours": nil} {
		t.Run(name, func(t *testing.T) {
			svg := string(ChartSVG(buckets, "quiet"))
			els := chartParse(t, svg)
			chartSafe(t, svg, els)
			if e := chartFind(els, "text", "chart-empty"); len(e) != 1 || e[0].text != "No deliveries in this period" {
				t.Fatalf("empty state = %+v\n%s", e, svg)
			}
			if bars := chartFind(els, "g", "chart-bar"); len(bars) != 0 {
				t.Fatalf("%d bars in an empty chart", len(bars))
			}
			if m := chartFind(els, "text", "chart-max"); len(m) != 0 {
				t.Fatalf("an empty chart labels a max")
			}
			if !strings.Contains(els[0].attrs["aria-label"], "no deliveries") {
				t.Fatalf("aria-label = %q", els[0].attrs["aria-label"])
			}
		})
	}
}

// TestChartTitleEscaped: the title, which may hold an endpoint's URL, is text: markup in it shows
// as itself and adds no element or attribute.
func TestChartTitleEscaped(t *testing.T) {
	title := `https://evil.example/"><script>alert(1)</script><rect onload="x" style='y'>&amp;`
	buckets := chartHours(chartStart, 3)
	buckets[1].Failed = 2
	svg := string(ChartSVG(buckets, title))
	els := chartParse(t, svg)
	chartSafeElements(t, els)
	if strings.Contains(svg, "<script") || strings.Contains(svg, "<rect onload") {
		t.Fatalf("the title's markup is markup:\n%s", svg)
	}
	if n := len(chartFind(els, "rect", "")); n != 3+1 {
		t.Fatalf("%d rects, want the legend's 3 and the one bar's 1", n)
	}
	if got := chartFind(els, "title", "")[0].text; got != title {
		t.Fatalf("<title> reads %q, want %q", got, title)
	}
	if got := els[0].attrs["aria-label"]; !strings.HasPrefix(got, title+": ") {
		t.Fatalf("aria-label reads %q", got)
	}
}
