package flightrec

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Finding is one thing Diagnose found.
type Finding struct {
	// Kind is one of
	//	missing   a rank left no dump
	//	mismatch  at one collective, ranks are in different calls (another
	//	          operation, or the same with another size)
	//	behind    ranks wait in a collective that a rank never entered
	//	no-message a rank waits for a message its peer never sent
	//	stuck     every rank is in the same collective, none finishes
	//	slow      nothing is stuck, but one rank keeps the others waiting
	Kind   string `json:"kind"`
	Rank   int    `json:"rank"`             // the rank named; -1 when none is
	Others []int  `json:"others,omitempty"` // the ranks it is compared with
	Comm   string `json:"comm,omitempty"`
	Seq    uint64 `json:"seq,omitempty"`
	Call   *Event `json:"call,omitempty"`  // the call the others are in (or the rank's, for mismatch)
	Their  *Event `json:"their,omitempty"` // the others' call, for mismatch
	// Waited is how long the others have waited (behind, no-message,
	// stuck) or waited on average per collective (slow), in seconds.
	Waited float64 `json:"waited_s"`
	Text   string  `json:"text"`
}

// Report is train doctor's answer.
type Report struct {
	Size     int       `json:"size"`
	Dumped   []int     `json:"dumped"`  // ranks with a dump
	Reasons  []string  `json:"reasons"` // why they dumped, rank by rank
	Findings []Finding `json:"findings"`
}

// SlowWait is the mean wait per collective for the others below which no
// rank is called slow.
const SlowWait = 100 * time.Millisecond

// Diagnose reads the dumps of one job (Read) and says what went wrong.
func Diagnose(ds []Dump) Report {
	rep := Report{Size: ds[0].Size}
	have := map[int]*Dump{}
	for i := range ds {
		d := &ds[i]
		have[d.Rank] = d
		rep.Dumped = append(rep.Dumped, d.Rank)
		rep.Reasons = append(rep.Reasons, d.Reason)
	}
	for r := range rep.Size {
		if have[r] == nil {
			rep.Findings = append(rep.Findings, Finding{Kind: "missing", Rank: r,
				Text: fmt.Sprintf("rank %d left no dump: it died before it could write one, or wrote it elsewhere (--flight-dir)", r)})
		}
	}
	comms := commsOf(ds)
	for _, c := range comms {
		rep.Findings = append(rep.Findings, collectives(c)...)
	}
	rep.Findings = append(rep.Findings, chains(messages(ds, comms))...)
	for _, c := range comms {
		if f, ok := slow(c); ok {
			rep.Findings = slowOrStuck(rep.Findings, f)
		}
	}
	return rep
}

// slowOrStuck adds a slow rank's finding unless the ranks are stuck for
// another reason. A dump taken while a slow rank is late (SIGUSR2) shows
// the others waiting for it: when that wait is no longer than its usual
// lateness, it is the slowness caught in the act, not a stall. A dump
// that lands just as the lateness begins also finds other ranks not yet
// in the collective: after a wait shorter than SlowWait they are on
// their way to it, not behind.
func slowOrStuck(fs []Finding, slow Finding) []Finding {
	var out []Finding
	var now *Finding
	for i := range fs {
		f := &fs[i]
		switch {
		case f.Kind == "missing":
		case f.Kind == "behind" && f.Rank == slow.Rank && f.Waited <= 3*slow.Waited+1:
			now = f
			continue
		case f.Kind == "behind" && f.Waited < SlowWait.Seconds():
			continue
		default:
			return fs
		}
		out = append(out, *f)
	}
	if now != nil {
		slow.Text += fmt.Sprintf(" When the dumps were taken the others had waited %.1f s for it in collective %d on %s, %s.", now.Waited, now.Seq, now.Comm, now.Call.Describe())
	}
	return append(out, slow)
}

// Lines is the report in plain lines, most important first.
func (rep Report) Lines() []string {
	reasons := map[string]bool{}
	var rs []string
	for _, r := range rep.Reasons {
		if !reasons[r] {
			reasons[r] = true
			rs = append(rs, r)
		}
	}
	head := fmt.Sprintf("%d ranks, dumps from %d (%s)", rep.Size, len(rep.Dumped), strings.Join(rs, ", "))
	lines := []string{head}
	for _, f := range rep.Findings {
		lines = append(lines, f.Text)
	}
	if len(rep.Findings) == 0 {
		lines = append(lines, fmt.Sprintf("nothing wrong: no rank is behind, the ranks' calls agree, and no rank kept the others waiting %v or more per collective",
			SlowWait))
	}
	return lines
}

// member is one rank's view of a communicator.
type member struct {
	d    *Dump
	info CommInfo
	coll map[uint64]*Event // collectives by sequence number
}

// comm is one communicator across the dumps.
type comm struct {
	name    string
	members []*member // by world rank
	world   map[int]int
}

func commsOf(ds []Dump) []*comm {
	byName := map[string]*comm{}
	var out []*comm
	for i := range ds {
		d := &ds[i]
		for _, ci := range d.Comms {
			c := byName[ci.Name]
			if c == nil {
				c = &comm{name: ci.Name, world: map[int]int{}}
				byName[ci.Name] = c
				out = append(out, c)
			}
			m := &member{d: d, info: ci, coll: map[uint64]*Event{}}
			for j := range d.Events {
				if e := &d.Events[j]; e.Comm == ci.Name && e.Collective() {
					m.coll[e.Seq] = e
				}
			}
			c.members = append(c.members, m)
			c.world[ci.Rank] = d.Rank
		}
	}
	return out
}

// signature is what must agree between the ranks' calls of one collective.
func signature(e *Event) string { return fmt.Sprintf("%s/%s/%d/%s", e.Op, e.Algo, e.Bytes, e.Dtype) }

// collectives finds the first collective on c where the ranks' calls
// differ, and the ranks that never entered the newest one others wait in.
func collectives(c *comm) []Finding {
	var out []Finding
	if f, ok := mismatch(c); ok {
		out = append(out, f)
	}
	// The newest collective begun anywhere on c, and who waits in it.
	var top uint64
	for _, m := range c.members {
		top = max(top, m.info.Seq)
	}
	if top == 0 {
		return out
	}
	var waiting, behind []*member
	var call *Event
	for _, m := range c.members {
		switch e := m.coll[top]; {
		case m.info.Seq < top:
			behind = append(behind, m)
		case e != nil && e.End == 0:
			waiting = append(waiting, m)
			if call == nil || e.Start < call.Start {
				call = e
			}
		}
	}
	if len(waiting) == 0 {
		return out
	}
	w := ranksOf(waiting)
	waited := time.Duration(waiting[0].d.Time - call.Start).Seconds()
	for _, m := range waiting {
		waited = max(waited, time.Duration(m.d.Time-m.coll[top].Start).Seconds())
	}
	if len(behind) == 0 {
		if len(waiting) == len(c.members) && len(out) == 0 {
			out = append(out, Finding{Kind: "stuck", Rank: -1, Others: w, Comm: c.name, Seq: top, Call: call, Waited: waited,
				Text: fmt.Sprintf("every rank of %s is in its collective %d, %s, and has been for up to %.1f s: a slow collective or a stuck network",
					c.name, top, call.Describe(), waited)})
		}
		return out
	}
	for _, m := range behind {
		text := fmt.Sprintf("rank %d is behind on %s: %s %s waited %.1f s in collective %d, %s; rank %d never entered it. %s",
			m.d.Rank, c.name, plural("rank", w), isAre(w), waited, top, call.Describe(), m.d.Rank, whereIs(m.d, c.name, m.info.Seq, m.coll[m.info.Seq]))
		out = append(out, Finding{Kind: "behind", Rank: m.d.Rank, Others: w, Comm: c.name, Seq: top, Call: call, Waited: waited, Text: text})
	}
	return out
}

// mismatch is the first collective on c that the ranks called
// differently: the ranks outside the largest group agreeing are named.
func mismatch(c *comm) (Finding, bool) {
	var seqs []uint64
	seen := map[uint64]bool{}
	for _, m := range c.members {
		for s := range m.coll {
			if !seen[s] {
				seen[s] = true
				seqs = append(seqs, s)
			}
		}
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	for _, s := range seqs {
		groups := map[string][]*member{}
		var keys []string
		for _, m := range c.members {
			if e := m.coll[s]; e != nil {
				k := signature(e)
				if groups[k] == nil {
					keys = append(keys, k)
				}
				groups[k] = append(groups[k], m)
			}
		}
		if len(keys) < 2 {
			continue
		}
		sort.SliceStable(keys, func(i, j int) bool { return len(groups[keys[i]]) > len(groups[keys[j]]) })
		most := groups[keys[0]]
		their := most[0].coll[s]
		var odd []string
		var first *member
		for _, k := range keys[1:] {
			for _, m := range groups[k] {
				if first == nil {
					first = m
				}
				e := m.coll[s]
				how := "is in a different call"
				if e.Op == their.Op && e.Algo == their.Algo && e.Bytes != their.Bytes {
					how = "called it with a different size"
				}
				odd = append(odd, fmt.Sprintf("rank %d %s: %s", m.d.Rank, how, e.Describe()))
			}
		}
		if len(most) == 1 && len(keys) == 2 {
			// Two ranks, or one against one: no majority to blame.
			odd = append(odd, fmt.Sprintf("rank %d: %s", most[0].d.Rank, their.Describe()))
			return Finding{Kind: "mismatch", Rank: -1, Comm: c.name, Seq: s, Call: first.coll[s], Their: their,
				Text: fmt.Sprintf("the ranks called collective %d on %s differently: %s", s, c.name, strings.Join(odd, "; "))}, true
		}
		w := ranksOf(most)
		return Finding{Kind: "mismatch", Rank: first.d.Rank, Others: w, Comm: c.name, Seq: s, Call: first.coll[s], Their: their,
			Text: fmt.Sprintf("collective %d on %s: %s; %s in %s", s, c.name, strings.Join(odd, "; "), plural("rank", w), their.Describe())}, true
	}
	return Finding{}, false
}

// whereIs says where a rank that is behind was: its last call on the
// communicator, and what it was doing when it dumped.
func whereIs(d *Dump, comm string, seq uint64, last *Event) string {
	var b strings.Builder
	switch {
	case seq == 0:
		fmt.Fprintf(&b, "It has made no collective on %s.", comm)
	case last == nil:
		fmt.Fprintf(&b, "Its last collective on %s was number %d (no longer in its recorder).", comm, seq)
	case last.End != 0:
		fmt.Fprintf(&b, "Its last collective there was number %d, %s, which ended %.1f s before its dump.", seq, last.Describe(),
			time.Duration(d.Time-last.End).Seconds())
	default:
		fmt.Fprintf(&b, "Its last collective there, number %d, %s, is still in flight.", seq, last.Describe())
	}
	if e := openCall(d); e != nil && !(e.Comm == comm && e.Seq == seq && e.Collective()) {
		fmt.Fprintf(&b, " It is waiting in %s %s, for %.1f s.", callName(e), e.Describe(), time.Duration(d.Time-e.Start).Seconds())
	} else {
		fmt.Fprintf(&b, " At its dump it was at step %d, %s, for %.1f s.", d.Step, d.Phase, time.Duration(d.Time-d.PhaseSince).Seconds())
	}
	return b.String()
}

// openCall is the oldest call still in flight in a dump, nil if none.
func openCall(d *Dump) *Event {
	var o *Event
	for i := range d.Events {
		if e := &d.Events[i]; e.End == 0 && (o == nil || e.Start < o.Start) {
			o = e
		}
	}
	return o
}

func callName(e *Event) string {
	if e.Collective() {
		return fmt.Sprintf("collective %d on %s,", e.Seq, e.Comm)
	}
	return fmt.Sprintf("message %d on %s,", e.Seq, e.Comm)
}

// messages finds ranks waiting for a message (a receive or a probe from
// one peer) that the peer has not sent.
func messages(ds []Dump, comms []*comm) []Finding {
	byName := map[string]*comm{}
	for _, c := range comms {
		byName[c.name] = c
	}
	var out []Finding
	for i := range ds {
		d := &ds[i]
		seen := map[string]bool{} // a rank's first wait on each peer only: later ones wait behind it
		for j := range d.Events {
			e := &d.Events[j]
			if e.End != 0 || e.Peer < 0 || (e.Op != "recv" && e.Op != "probe") {
				continue
			}
			if k := fmt.Sprint(e.Comm, "/", e.Peer); seen[k] {
				continue
			} else {
				seen[k] = true
			}
			c := byName[e.Comm]
			if c == nil {
				continue
			}
			from, ok := c.world[e.Peer]
			var sender *member
			for _, m := range c.members {
				if ok && m.d.Rank == from {
					sender = m
				}
			}
			waited := time.Duration(d.Time - e.Start).Seconds()
			me := c.world2comm(d.Rank)
			f := Finding{Kind: "no-message", Rank: from, Others: []int{d.Rank}, Comm: e.Comm, Seq: e.Seq, Call: e, Waited: waited}
			switch {
			case sender == nil:
				f.Rank = -1
				f.Text = fmt.Sprintf("rank %d has waited %.1f s for message %d from rank %d of %s (%s); that rank left no dump",
					d.Rank, waited, e.Seq, e.Peer, e.Comm, e.Describe())
			case me >= 0 && sender.info.Sent[me] < e.Seq:
				f.Text = fmt.Sprintf("rank %d stopped talking to rank %d: rank %d has waited %.1f s on %s for its message %d (%s), and rank %d sent %d. %s",
					from, d.Rank, d.Rank, waited, e.Comm, e.Seq, e.Describe(), from, sender.info.Sent[me], lastSend(sender, me))
			default:
				continue // sent: on its way, or the wait is young
			}
			out = append(out, f)
		}
	}
	return out
}

// world2comm is world rank r's rank in c, -1 if not a member.
func (c *comm) world2comm(r int) int {
	for cr, wr := range c.world {
		if wr == r {
			return cr
		}
	}
	return -1
}

// lastSend describes m's last send to peer and where m is now.
func lastSend(m *member, peer int) string {
	d := m.d
	var last *Event
	for i := range d.Events {
		if e := &d.Events[i]; e.Comm == m.info.Name && e.Op == "send" && e.Peer == peer {
			last = e
		}
	}
	var b strings.Builder
	if last != nil {
		fmt.Fprintf(&b, "Its last message to it was %s. ", last.Describe())
	}
	if e := openCall(d); e != nil {
		fmt.Fprintf(&b, "It is waiting in %s %s, for %.1f s.", callName(e), e.Describe(), time.Duration(d.Time-e.Start).Seconds())
	} else {
		fmt.Fprintf(&b, "At its dump it was at step %d, %s, for %.1f s.", d.Step, d.Phase, time.Duration(d.Time-d.PhaseSince).Seconds())
	}
	return b.String()
}

// slow finds a rank that arrived last at most of the collectives every
// rank finished on c, keeping the others waiting SlowWait or more each
// time on average. A rank's wait is its own clock's (end - start), so
// hosts' clocks need not agree: the last to arrive waits least.
func slow(c *comm) (Finding, bool) {
	n := len(c.members)
	if n < 2 {
		return Finding{}, false
	}
	last := make([]int, n)
	waits := make([]float64, n)
	gaps := make([][2]float64, n) // per rank: its gap before the collectives it was last at, the others' mean gap there
	total := 0
	var worst, worstPrev *Event
	var worstExcess float64
	for s, e0 := range c.members[0].coll {
		evs := make([]*Event, n)
		complete := true
		for i, m := range c.members {
			e := m.coll[s]
			if e == nil || e.End == 0 || signature(e) != signature(e0) {
				complete = false
				break
			}
			evs[i] = e
		}
		if !complete {
			continue
		}
		lag := 0
		for i, e := range evs {
			if e.End-e.Start < evs[lag].End-evs[lag].Start {
				lag = i
			}
		}
		dl := evs[lag].End - evs[lag].Start
		var w, og float64
		for i, e := range evs {
			if i != lag {
				w += time.Duration(e.End - e.Start - dl).Seconds()
				og += gapBefore(c.members[i].d, e)
			}
		}
		if w/float64(n-1) < SlowWait.Seconds() {
			continue // nobody waited long: no one to blame
		}
		total++
		last[lag]++
		waits[lag] += w / float64(n-1)
		g := gapBefore(c.members[lag].d, evs[lag])
		gaps[lag][0] += g
		gaps[lag][1] += og / float64(n-1)
		if ex := g - og/float64(n-1); worst == nil || ex > worstExcess {
			worst, worstExcess = evs[lag], ex
			worstPrev = previous(c.members[lag].d, evs[lag])
		}
	}
	if total < 3 {
		return Finding{}, false
	}
	lag := 0
	for i := range last {
		if last[i] > last[lag] {
			lag = i
		}
	}
	mean := waits[lag] / float64(last[lag])
	if 2*last[lag] < total {
		return Finding{}, false
	}
	m := c.members[lag]
	var others []int
	for _, o := range c.members {
		if o != m {
			others = append(others, o.d.Rank)
		}
	}
	sort.Ints(others)
	text := fmt.Sprintf("rank %d was slow: of the %d collectives on %s where the others waited %v or more for the last rank, rank %d was last at %d, and the others waited %.2f s for it each time on average (%.1f s in all).",
		m.d.Rank, total, c.name, SlowWait, m.d.Rank, last[lag], mean, waits[lag])
	k := float64(last[lag])
	text += fmt.Sprintf(" Before those collectives it spent %.2f s on average since its previous call, the others %.2f s", gaps[lag][0]/k, gaps[lag][1]/k)
	if worst != nil {
		text += fmt.Sprintf("; the most before collective %d, %s: %.2f s more than the others", worst.Seq, worst.Describe(), worstExcess)
		if worstPrev != nil {
			text += fmt.Sprintf(", since its %s %s", callName(worstPrev), worstPrev.Describe())
			text = strings.TrimSuffix(text, ",")
		}
	}
	return Finding{Kind: "slow", Rank: m.d.Rank, Others: others, Comm: c.name, Call: worst, Waited: mean, Text: text + "."}, true
}

// gapBefore is the time in seconds between the end of d's previous call
// (on any communicator) and the start of e: time the rank spent on other
// work before it.
func gapBefore(d *Dump, e *Event) float64 {
	p := previous(d, e)
	if p == nil {
		return 0
	}
	return time.Duration(e.Start - p.End).Seconds()
}

// previous is the call of d's that ended last before e started.
func previous(d *Dump, e *Event) *Event {
	var prev *Event
	for i := range d.Events {
		if p := &d.Events[i]; p.ID < e.ID && p.End != 0 && p.End <= e.Start && (prev == nil || p.End > prev.End) {
			prev = p
		}
	}
	return prev
}

func ranksOf(ms []*member) []int {
	var r []int
	for _, m := range ms {
		r = append(r, m.d.Rank)
	}
	sort.Ints(r)
	return r
}

func plural(word string, rs []int) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = fmt.Sprint(r)
	}
	if len(rs) == 1 {
		return word + " " + s[0]
	}
	return word + "s " + strings.Join(s, ", ")
}

func isAre(rs []int) string {
	if len(rs) == 1 {
		return "has"
	}
	return "have"
}

// chains puts first the messages whose sender waits on nothing (the
// cause), and shortens those whose sender is itself waiting for another
// rank's message: "rank 0 waits for rank 3, which waits for rank 1".
func chains(fs []Finding) []Finding {
	waitsOn := map[int]int{} // waiter -> the rank it waits for
	for _, f := range fs {
		if f.Rank >= 0 {
			waitsOn[f.Others[0]] = f.Rank
		}
	}
	var roots, rest []Finding
	for _, f := range fs {
		next, waiting := waitsOn[f.Rank]
		if f.Rank < 0 || !waiting {
			roots = append(roots, f)
			continue
		}
		path := []string{fmt.Sprint(f.Rank)}
		seen := map[int]bool{f.Others[0]: true, f.Rank: true}
		for r, ok := next, true; ok && !seen[r]; r, ok = waitsOn[r] {
			seen[r] = true
			path = append(path, fmt.Sprint(r))
		}
		f.Kind = "waits-on"
		f.Text = fmt.Sprintf("rank %d has waited %.1f s for message %d from rank %s (%s), which waits in turn for rank %s",
			f.Others[0], f.Waited, f.Seq, path[0], f.Call.Describe(), strings.Join(path[1:], ", which waits for rank "))
		rest = append(rest, f)
	}
	return append(roots, rest...)
}
