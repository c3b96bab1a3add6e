package enforcement

import (
	"testing"
	"time"
)

// TestAnswerReuse checks that PreFilter asks once for a burst of pods
// with the same snapshot, and again as soon as anything it judged changes
// or the window has passed.
func TestAnswerReuse(t *testing.T) {
	w := acmeWorld()
	w.answerReuse = time.Hour
	for i, s := range w.states {
		s.ResourceVersion = "1"
		w.states[i] = s
	}
	w.policies[0].ResourceVersion = "1"
	h := w.start(t)
	calls := func(want int64, what string) {
		t.Helper()
		if got := h.eval.calls.Load(); got != want {
			t.Errorf("%s: %d evaluator calls, want %d", what, got, want)
		}
	}

	h.schedule(pod(acmeNS, "train-0"))
	h.schedule(pod(acmeNS, "train-1"))
	calls(1, "two pods, one snapshot")

	newer := w.states[0].DeepCopy()
	newer.ResourceVersion = "2"
	must(t, h.pl.caches.states.Update(newer))
	h.schedule(pod(acmeNS, "train-2"))
	calls(2, "after the evidence of a1 changed")

	policy := w.policies[0].DeepCopy()
	policy.ResourceVersion = "2"
	must(t, h.pl.caches.policies.Update(policy))
	h.schedule(pod(acmeNS, "train-3"))
	calls(3, "after the policy changed")

	h.schedule(pod(plain, "web"))
	calls(3, "an unprotected pod")

	c := h.schedule(pod(acmeNS, "train-4"))
	calls(3, "the same snapshot again")
	check(t, "PreBind", h.bind(c, pod(acmeNS, "train-4"), "a1"), want{})
	calls(4, "PreBind never reuses")

	h.pl.answers.window = time.Nanosecond
	time.Sleep(time.Millisecond)
	h.schedule(pod(acmeNS, "train-5"))
	calls(5, "after the window")
}
