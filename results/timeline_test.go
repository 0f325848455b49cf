package results

import (
	"cmp"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lockcheck/lockcheck/checker"
	"github.com/lockcheck/lockcheck/checker/checktest"
	"github.com/lockcheck/lockcheck/history"
)

// titlesOf lists the titles of a class of timeline shapes.
func titlesOf(svg, class string) []string {
	re := regexp.MustCompile(`class="` + regexp.QuoteMeta(class) + `"[^>]*><title>([^<]*)</title>`)
	var out []string
	for _, m := range re.FindAllStringSubmatch(svg, -1) {
		out = append(out, m[1])
	}
	return out
}

func TestTimelineNodeLanes(t *testing.T) {
	h := storyHistory(plain)
	svg := svgOf(t, renderReport(t, h, checker.Check(h, nil, checker.Options{})))

	lanes := regexp.MustCompile(`class="lane-label lane-(\w+)" x="6" y="[0-9.]+">([^<]*)<`).FindAllStringSubmatch(svg, -1)
	var got []string
	for _, l := range lanes {
		got = append(got, l[1]+" "+l[2])
	}
	// plain's clock target is c0, a client: a client is never a node lane.
	assert.Equal(t, []string{"nemesis nemesis", "node redis-0", "node redis-1", "node redis-2",
		"client c0", "client c1", "client c2", "client c3"}, got)

	for _, tc := range []struct {
		class string
		want  []string
	}{
		{"node-paused", []string{"redis-2 paused from 5.000 s to 6.000 s"}},
		{"node-killed", []string{"redis-1 killed from 10.000 s to 11.000 s"}},
		{"node-role", []string{"redis-0 master from 0.500 s to 30.000 s", "redis-1 replica of redis-0 from 0.500 s to 11.500 s",
			"redis-1 master from 11.500 s to 30.000 s"}},
		{"node-event", []string{"start redis-1 at 11.000 s: restarted: data wiped", "switch-master redis-1 at 11.500 s: redis-0 -&gt; redis-1"}},
	} {
		assert.ElementsMatch(t, tc.want, titlesOf(svg, tc.class), tc.class)
	}
}

// A partition is a bar on the node's lane from the cut to the heal, naming
// whom the node was cut from when only some links were cut, and a band
// across the timeline.
func TestTimelineNodePartition(t *testing.T) {
	for _, tc := range []struct {
		name  string
		links []string
		bar   string
	}{
		{"cut off whole (a container)", nil, "redis-0 cut off the network from 20.000 s to 24.000 s"},
		{"cut from some (the proxies)", []string{"c1", "c2", "redis-1"}, "redis-0 cut from: c1, c2, redis-1 from 20.000 s to 24.000 s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := storyHistory(plain)
			for _, e := range []history.Event{
				{Time: at(20_000), Process: history.Nemesis, Type: history.Info, F: history.NemPartition, Value: &history.Value{Target: "redis-0", Links: tc.links}},
				{Time: at(24_000), Process: history.Nemesis, Type: history.Info, F: history.NemHeal, Value: &history.Value{Target: "redis-0"}},
			} {
				e.Index = int64(len(h.Events))
				h.Events = append(h.Events, e)
			}
			svg := svgOf(t, renderReport(t, h, checker.Check(h, nil, checker.Options{})))
			assert.Equal(t, []string{tc.bar}, titlesOf(svg, "node-partitioned"))
			assert.Contains(t, titlesOf(svg, "fault-partition"), "partition redis-0 from 20.000 s to 24.000 s")
		})
	}
}

// A slowed or flaky link is a bar for as long as the fault holds, on its
// target's lane (a node's or a client's) naming the other ends, and on
// each other end's lane naming the target, with what the fault did; a
// fault still on when the history ends runs to its end. The text is
// escaped, and the faults are no points on the node lanes.
func TestTimelineLinkFaults(t *testing.T) {
	h := storyHistory(plain)
	for _, e := range []history.Event{
		{Time: at(20_000), Process: history.Nemesis, Type: history.Info, F: history.NemSlowLink,
			Value: &history.Value{Target: "redis-0", Links: []string{"c1", "redis-1"}, Detail: "200ms plus up to 50ms each way <b>"}},
		{Time: at(24_000), Process: history.Nemesis, Type: history.Info, F: history.NemSlowLinkEnd, Value: &history.Value{Target: "redis-0"}},
		{Time: at(25_000), Process: history.Nemesis, Type: history.Info, F: history.NemFlakyLink,
			Value: &history.Value{Target: "c2", Links: []string{"redis-0"}, Detail: "30% of connections reset"}},
	} {
		e.Index = int64(len(h.Events))
		h.Events = append(h.Events, e)
	}
	page := renderReport(t, h, checker.Check(h, nil, checker.Options{}))
	for _, class := range []string{"link-slow", "link-flaky", "fault-slow-link", "fault-flaky-link"} {
		assert.Contains(t, page, "svg ."+class+" {", "the page styles %s", class)
	}
	svg := svgOf(t, page)
	for _, tc := range []struct {
		class string
		want  []string
	}{
		{"link-slow", []string{
			"redis-0 slow to c1, redis-1: 200ms plus up to 50ms each way &lt;b&gt; from 20.000 s to 24.000 s",
			"c1 slow to redis-0: 200ms plus up to 50ms each way &lt;b&gt; from 20.000 s to 24.000 s",
			"redis-1 slow to redis-0: 200ms plus up to 50ms each way &lt;b&gt; from 20.000 s to 24.000 s",
		}},
		{"link-flaky", []string{
			"c2 flaky to redis-0: 30% of connections reset from 25.000 s to 30.000 s",
			"redis-0 flaky to c2: 30% of connections reset from 25.000 s to 30.000 s",
		}},
	} {
		assert.ElementsMatch(t, tc.want, titlesOf(svg, tc.class), tc.class)
	}
	assert.NotContains(t, svg, "<b>", "the detail is escaped")
	for _, title := range titlesOf(svg, "node-event") {
		assert.NotContains(t, title, "link", "a link fault is a bar, not a point")
	}
}

func TestTimelineNodeClock(t *testing.T) {
	h := storyHistory(hostile{key: "lock-0", target: "redis-2", errText: "busy"})
	// A jump may say "clock offset +5s"; a second jump ends the first.
	extra := []history.Event{
		{Time: at(15_000), Process: history.Nemesis, Type: history.Info, F: history.NemClockJump, Value: &history.Value{Target: "redis-0", Detail: "clock offset +5s"}},
		{Time: at(16_000), Process: history.Nemesis, Type: history.Info, F: history.NemClockJump, Value: &history.Value{Target: "redis-0", Detail: "clock offset -2s"}},
		{Time: at(17_000), Process: history.Nemesis, Type: history.Info, F: history.NemClockJump, Value: &history.Value{Target: "redis-0", Detail: "clock offset +0s"}},
	}
	for _, e := range extra {
		e.Index = int64(len(h.Events))
		h.Events = append(h.Events, e)
	}
	tl := newTimeline(h, &checker.Result{}, spanOf(h, &checker.Result{}))
	var clocks []string
	for _, b := range tl.Bars {
		if b.Class == "node-clock" {
			clocks = append(clocks, b.Title)
		}
	}
	assert.Equal(t, []string{
		"redis-2 clock +20s from 12.000 s to 14.000 s",
		"redis-0 clock +5s from 15.000 s to 16.000 s",
		"redis-0 clock -2s from 16.000 s to 17.000 s",
	}, clocks, "a reset, or an offset of zero, puts the clock back")
}

// TestTimelineDrawsEveryVerb: every verb of history's table, aimed at a
// node, is drawn on the node's lane as the table says: a verb that observes
// draws nothing, a fault with a mark draws its bar, a verb that heals ends
// the bar of the fault it heals, a link fault draws its links, and any
// other verb is a point.
func TestTimelineDrawsEveryVerb(t *testing.T) {
	for _, verb := range history.Verbs() {
		t.Run(verb, func(t *testing.T) {
			v := history.VerbOf(verb)
			h := storyHistory(hostile{key: "lock-0", target: "redis-2", errText: "busy"})
			// redis-9 is a node of no other event: what its lane shows
			// is the verb's.
			node := func(ms int64, verb string) {
				h.Events = append(h.Events, history.Event{Index: int64(len(h.Events)), Time: at(ms), Process: history.Nemesis, Type: history.Info, F: verb,
					Value: &history.Value{Target: "redis-9", Detail: "+5s", Links: []string{"redis-1"}}})
			}
			if v.Role == history.Heals {
				node(15_000, v.Heals)
			}
			node(16_000, verb)
			tl := newTimeline(h, &checker.Result{}, spanOf(h, &checker.Result{}))
			var drawn []string
			for _, s := range append(tl.Bars, tl.Marks...) {
				if strings.HasPrefix(s.Title, "redis-9 ") || strings.Contains(s.Title, " redis-9 at ") || strings.Contains(s.Title, " to redis-9") {
					drawn = append(drawn, s.Class+": "+s.Title)
				}
			}
			healed := history.VerbOf(v.Heals)
			switch {
			case v.ObservesOnly():
				assert.Empty(t, drawn, "a verb that observes draws nothing")
			case v.Link != "" || healed.Link != "":
				link := cmp.Or(v.Link, healed.Link)
				assert.Contains(t, strings.Join(drawn, "\n"), "link-"+link, "a link fault draws its links")
			case v.Role == history.Heals && healed.Lane.Mark != "":
				assert.Contains(t, strings.Join(drawn, "\n"), "node-"+healed.Lane.Mark+": redis-9", "the healed fault's bar")
				assert.Contains(t, strings.Join(drawn, "\n"), "from 15.000 s to 16.000 s", "ends where it is healed")
			case v.Lane.Mark != "":
				assert.Contains(t, strings.Join(drawn, "\n"), "node-"+v.Lane.Mark+": redis-9", "its bar")
			default:
				assert.Contains(t, strings.Join(drawn, "\n"), "node-event: "+verb+" redis-9 at 16.000 s", "a point")
			}
		})
	}
}

func TestTimelineShapesCarryTheirTimes(t *testing.T) {
	page := renderReport(t, sampleHistory(plain, "unfenced"), badResult(plain))
	svg := svgOf(t, page)
	// Every shape the script moves says where it is in time; the lanes and
	// the axis (which the script redraws) do not.
	assert.Contains(t, svg, `id="tl-double_ownership-1" class="window" x="398.3" y="6" width="51.4" height="100" data-a="0.52" data-b="0.6"`)
	assert.Contains(t, svg, `class="write-refused" d="M-3.0 73.0l6 6m0 -6l-6 6" transform="translate(649.6 0)" data-a="0.911"`)
	assert.Contains(t, svg, `data-plotx="64" data-plotw="900" data-ploty="6" data-axisy="106" data-span="1.4"`)
	body := svg[strings.Index(svg, `clip-path="url(#tl-clip)"`):]
	for _, tag := range regexp.MustCompile(`<(rect|path|text) [^>]*>`).FindAllString(body, -1) {
		assert.Contains(t, tag, "data-a=", "a timed shape: %s", tag)
	}
}

func TestCharts(t *testing.T) {
	h := lockCycles(4, 400, 40e9)
	res := &checker.Result{Span: checker.Interval{Start: t0, End: t0 + 40e9},
		Faults: []checker.Fault{{Kind: history.NemPause, Target: "c1", Start: t0 + 10e9, End: t0 + 11e9}}}
	c := newCharts(h, res, res.Span)
	require.NotNil(t, c)
	// lockCycles: acquire takes 1/8 of a 100 ms step, a write 2/8, a release 1/8.
	assert.Equal(t, []quantileRow{
		{Op: "acquire granted", Count: 400, P50: "12.5", P90: "12.5", P99: "12.5", P999: "12.5", Max: "12.5", Mean: "12.5"},
		{Op: "release", Count: 400, P50: "12.5", P90: "12.5", P99: "12.5", P999: "12.5", Max: "12.5", Mean: "12.5"},
		{Op: "write", Count: 400, P50: "25", P90: "25", P99: "25", P999: "25", Max: "25", Mean: "25"},
	}, c.Quantiles)
	assert.Len(t, c.Grants.Bars, 40, "a bar per second")
	assert.Equal(t, "0 s to 1 s: 10 grants (10.0/s)", c.Grants.Bars[0].Title)
	assert.Len(t, c.Grants.Bands, 1, "the pause is shaded")
	assert.Len(t, c.Latency.Paths, 4, "a range and a median path for acquire and release")
	assert.Contains(t, c.Notes[0], "each column is 133.33 ms of the run")

	long := lockCycles(2, 1000, 1200e9)
	res.Span = checker.Interval{Start: t0, End: t0 + 1200e9}
	c = newCharts(long, res, res.Span)
	assert.LessOrEqual(t, len(c.Grants.Bars), maxRateBars, "a long run is aggregated")
	assert.Contains(t, c.Notes, "Grants: each bar is 5 s of the run, shown as a rate per second.")
}

// TestTimelineBeliefsAsTheChecksReadThem: a belief is drawn as late only
// from the moment the service certainly let its lease go. A lease its
// library keeps alive (etcd's keepalive, which the history does not show)
// is believed past its TTL and is not late; a TTL lease whose holder's
// pause outlasted it is, one TTL into the pause; so is a session lock once
// its session was killed.
func TestTimelineBeliefsAsTheChecksReadThem(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    func(b *checktest.Builder)
		late []string
	}{
		{"a lease kept alive past its TTL", func(b *checktest.Builder) {
			b.Acquire(0, 0, 1, 1).Release(0, 900, 901)
		}, nil},
		{"a lease its holder's pause outlasted", func(b *checktest.Builder) {
			b.Acquire(0, 0, 1, 1).Nemesis(50, history.NemPause, "c0", "", "").
				Nemesis(600, history.NemResume, "c0", "", "").Release(0, 900, 901)
		}, []string{`c0 still believed it held &#34;lock-0&#34; after the service had let its lease go at 0.150 s`}},
		{"a session killed under its holder", func(b *checktest.Builder) {
			b.Config.TTLms = 0
			b.Op(0, history.FAcquire, 0, nil, 1, history.OK, &history.Value{Token: "c0", Session: "pg-0/7"})
			b.Add(300, history.Nemesis, history.Info, history.NemKillSession, &history.Value{Target: "c0", Session: "pg-0/7"})
			b.Release(0, 900, 901)
		}, []string{`c0 still believed it held &#34;lock-0&#34; after the service had let its lease go at 0.300 s`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := checktest.NewBuilder("fenced")
			tc.b(b)
			b.Nemesis(1000, history.NemRunEnd, "", "", "")
			h := b.Build(t)
			svg := svgOf(t, renderReport(t, h, checker.Check(h, nil, checker.Options{})))
			assert.Equal(t, tc.late, titlesOf(svg, "belief-late"))
			assert.Len(t, titlesOf(svg, "belief"), 1)
		})
	}
}
