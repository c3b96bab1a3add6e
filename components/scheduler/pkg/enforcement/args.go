package enforcement

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/xila-guard/xila-guard/components/api/guard"
)

// MaxEvalTimeout bounds XILAGUARD_EVAL_TIMEOUT_MS: PreFilter runs in the
// scheduler's single scheduling loop, so a longer wait would stall every
// other pod behind a silent evaluator.
const MaxEvalTimeout = 10 * time.Second

// DefaultAnswerReuse is how long an answer about an unchanged snapshot is
// reused by default: long enough to serve a burst of a tenant's pods with
// one call, short enough that time-based findings (stale evidence) are
// seen at once — and PreBind re-judges on fresh facts anyway.
const DefaultAnswerReuse = 500 * time.Millisecond

// MaxAnswerReuse bounds Args.AnswerReuse.
const MaxAnswerReuse = 5 * time.Second

// Args configure the plugin in a KubeSchedulerConfiguration's pluginConfig.
// Every field is optional. The environment variables of the architecture
// (XILAGUARD_CORE_URL, XILAGUARD_ENFORCE_ACCEPT_MOCK,
// XILAGUARD_EVAL_TIMEOUT_MS, XILAGUARD_POOL_LABEL) take precedence over the
// matching field, so that one configuration file serves every deployment.
type Args struct {
	// CoreURL is the evaluator's base URL; default http://127.0.0.1:8080.
	CoreURL string `json:"coreURL,omitempty"`
	// AcceptMock asks the evaluator for the lab profile, which accepts mock
	// evidence as simulated integration. Default false: production.
	AcceptMock *bool `json:"acceptMock,omitempty"`
	// EvalTimeout bounds one evaluator call; default 800ms.
	EvalTimeout *metav1.Duration `json:"evalTimeout,omitempty"`
	// AnswerReuse is how long PreFilter may reuse the evaluator's answer
	// about a snapshot identical to one it has asked about: same profile,
	// tenant, policy version, and nodes with the same UIDs and evidence
	// versions. PreBind never reuses an answer. Default 500ms; 0 asks in
	// every cycle.
	AnswerReuse *metav1.Duration `json:"answerReuse,omitempty"`
	// PoolLabel is the node label whose value names a node's pool, and the
	// key of the pool taint; default guard.xila.us/tenant-pool.
	PoolLabel string `json:"poolLabel,omitempty"`
	// EvaluatePerNode makes Filter call the evaluator once for every node
	// instead of PreFilter once per cycle. It exists only to measure what
	// the per-cycle snapshot saves (docs/benchmarks/scheduler.md); it is
	// slower by orders of magnitude and never worth enabling.
	EvaluatePerNode bool `json:"evaluatePerNode,omitempty"`
}

// settings are Args resolved against the environment and the defaults.
type settings struct {
	coreURL         string
	profile         guard.Profile
	evalTimeout     time.Duration
	answerReuse     time.Duration
	poolLabel       string
	evaluatePerNode bool
}

// resolveSettings applies lookupEnv over args over the defaults and
// validates the result.
func resolveSettings(args Args, lookupEnv func(string) (string, bool)) (settings, error) {
	s := settings{
		coreURL:         guard.DefaultCoreURL,
		profile:         guard.ProfileProduction,
		evalTimeout:     guard.DefaultEvalTimeout,
		answerReuse:     DefaultAnswerReuse,
		poolLabel:       guard.LabelTenantPool,
		evaluatePerNode: args.EvaluatePerNode,
	}
	var errs []error
	if args.CoreURL != "" {
		s.coreURL = args.CoreURL
	}
	if v, ok := lookupEnv(guard.EnvCoreURL); ok && v != "" {
		s.coreURL = v
	}
	acceptMock := args.AcceptMock != nil && *args.AcceptMock
	if v, ok := lookupEnv(guard.EnvEnforceAcceptMock); ok && v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: want true or false", guard.EnvEnforceAcceptMock, v))
		}
		acceptMock = b
	}
	if acceptMock {
		s.profile = guard.ProfileLab
	}
	if args.EvalTimeout != nil {
		s.evalTimeout = args.EvalTimeout.Duration
	}
	if v, ok := lookupEnv(guard.EnvEvalTimeoutMS); ok && v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: want a whole number of milliseconds", guard.EnvEvalTimeoutMS, v))
		}
		s.evalTimeout = time.Duration(ms) * time.Millisecond
	}
	if s.evalTimeout <= 0 || s.evalTimeout > MaxEvalTimeout {
		errs = append(errs, fmt.Errorf("evaluator timeout %s: want more than 0 and at most %s", s.evalTimeout, MaxEvalTimeout))
	}
	if args.AnswerReuse != nil {
		s.answerReuse = args.AnswerReuse.Duration
	}
	if s.answerReuse < 0 || s.answerReuse > MaxAnswerReuse {
		errs = append(errs, fmt.Errorf("answerReuse %s: want 0 to %s", s.answerReuse, MaxAnswerReuse))
	}
	if args.PoolLabel != "" {
		s.poolLabel = args.PoolLabel
	}
	if v, ok := lookupEnv(guard.EnvPoolLabel); ok && v != "" {
		s.poolLabel = v
	}
	for _, msg := range validation.IsQualifiedName(s.poolLabel) {
		errs = append(errs, fmt.Errorf("pool label %q: %s", s.poolLabel, msg))
	}
	if u, err := url.Parse(s.coreURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("evaluator URL %q: want http(s)://host[:port]", s.coreURL))
	}
	return s, errors.Join(errs...)
}
