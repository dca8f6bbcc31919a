package history

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"

	"github.com/anishathalye/porcupine"
)

// lockState is the model's state of one lock or section name: what Spanner
// has committed, not what any holder believes.
//
// A takeover replaces a holder that went silent, so Spanner's row has one
// holder at any time by construction; what "at most one holder" means for a
// history is that nothing a displaced holder does commits after it was
// displaced: no guarded write, renewal, release or completion. Whether the
// displaced holder had really been silent for the lease is a matter of
// Spanner's timestamps, which the timeline checks look at.
type lockState struct {
	holder  int64 // the token the row is held under; 0 if free
	highest int64 // the highest token acquired
	done    bool  // a run-once section recorded DONE
	// written is, per resource, the highest token a committed guarded
	// write carried, as sorted "resource=token" pairs joined by "\n", so
	// that the state stays comparable with == (resources are names, which
	// hold no control characters).
	written string
}

func (s lockState) writtenOf(resource string) int64 {
	for _, kv := range strings.Split(s.written, "\n") {
		if r, t, ok := cutPair(kv); ok && r == resource {
			return t
		}
	}
	return 0
}

// cutPair splits "resource=token"; the token has no "=", the resource may.
func cutPair(kv string) (string, int64, bool) {
	i := strings.LastIndexByte(kv, '=')
	if i < 0 {
		return "", 0, false
	}
	t, err := strconv.ParseInt(kv[i+1:], 10, 64)
	return kv[:i], t, err == nil
}

func (s lockState) withWritten(resource string, token int64) lockState {
	var pairs []string
	for _, kv := range strings.Split(s.written, "\n") {
		if r, _, ok := cutPair(kv); ok && r != resource {
			pairs = append(pairs, kv)
		}
	}
	pairs = append(pairs, resource+"="+strconv.FormatInt(token, 10))
	slices.Sort(pairs)
	s.written = strings.Join(pairs, "\n")
	return s
}

func (s lockState) String() string {
	h := "free"
	if s.holder != 0 {
		h = fmt.Sprintf("held by %d", s.holder)
	}
	out := fmt.Sprintf("%s, highest %d", h, s.highest)
	if s.done {
		out += ", DONE"
	}
	if s.written != "" {
		out += ", written " + strings.ReplaceAll(s.written, "\n", " ")
	}
	return out
}

// effect returns the state after o took effect in s, or, if o could not
// have taken effect in s, why not.
func effect(s lockState, o *Op) (lockState, string) {
	t := o.Token
	switch o.Kind {
	case Acquire:
		if t <= s.highest {
			return s, fmt.Sprintf("acquired token %d, but token %d was already acquired: tokens must strictly increase", t, s.highest)
		}
		if o.RunOnce && s.done {
			return s, "acquired a run-once section that was already DONE"
		}
		s.holder, s.highest = t, t
	case Renew:
		if s.holder != t {
			return s, fmt.Sprintf("token %d renewed a lease it did not hold (%s)", t, s)
		}
	case Write:
		if s.holder != t {
			return s, fmt.Sprintf("a guarded write with token %d committed while it was not the holder (%s)", t, s)
		}
		if w := s.writtenOf(o.Resource); t < w {
			return s, fmt.Sprintf("a guarded write with token %d committed after token %d had written %s", t, w, o.Resource)
		}
		s = s.withWritten(o.Resource, t)
	case Release, Fail:
		if s.holder != t {
			return s, fmt.Sprintf("token %d released a lease it did not hold (%s)", t, s)
		}
		s.holder = 0
	case Complete:
		if s.holder != t {
			return s, fmt.Sprintf("token %d recorded DONE without holding the section (%s)", t, s)
		}
		if s.done {
			return s, fmt.Sprintf("token %d recorded DONE a second time", t)
		}
		s.holder, s.done = 0, true
	case SeeDone:
		if !s.done {
			return s, "saw the section DONE before any completion"
		}
	default:
		return s, fmt.Sprintf("operation kind %q is not part of the model", o.Kind)
	}
	return s, ""
}

// step returns the states o may leave s in: the effect if it is OK, the
// effect or nothing if Unknown; none if an OK operation cannot take effect.
func step(s lockState, o *Op) []lockState {
	next, why := effect(s, o)
	switch {
	case o.Outcome == Unknown && why == "":
		return []lockState{s, next}
	case o.Outcome == Unknown:
		return []lockState{s}
	case why != "":
		return nil
	}
	return []lockState{next}
}

// inModel reports whether o goes into the linearizability check: only
// operations that took effect or may have. The others (refused, or ended
// without effect) change nothing, and an acquisition that returned no
// lease has no token to check.
func inModel(o *Op) bool {
	switch o.Kind {
	case Acquire, Renew, SeeDone:
		return o.Outcome == OK
	case Write, Release, Complete, Fail:
		return o.Outcome == OK || o.Outcome == Unknown
	}
	return false
}

// lockModel is the porcupine model of one name's row and the resources its
// holders write.
func lockModel() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Init: func() []any { return []any{lockState{}} },
		Step: func(state, input, output any) []any {
			var out []any
			for _, s := range step(state.(lockState), input.(*Op)) {
				out = append(out, s)
			}
			return out
		},
		Hash: func(state any) uint64 {
			s := state.(lockState)
			h := fnv.New64a()
			fmt.Fprintf(h, "%d/%d/%t/%s", s.holder, s.highest, s.done, s.written)
			return h.Sum64()
		},
		DescribeOperation: func(input, output any) string {
			o := input.(*Op)
			return fmt.Sprintf("%s %s token %d -> %s", o.Client, o.Kind, o.Token, o.Outcome)
		},
		DescribeState: func(state any) string { return state.(lockState).String() },
	}
	return nm.ToModel()
}
