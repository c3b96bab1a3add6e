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

// DefaultAnswerReuse is how long an answer about an unchanged snapshot is
// reused by default: long enough to serve a burst of a tenant's pods with
// one evaluation, short enough that time-based findings (stale evidence)
// are seen at once — and Bind re-judges on fresh facts anyway.
const DefaultAnswerReuse = 500 * time.Millisecond

// MaxAnswerReuse bounds Args.AnswerReuse.
const MaxAnswerReuse = 5 * time.Second

// Args configure the plugin in a KubeSchedulerConfiguration's pluginConfig.
// Every field is optional. The environment variables of the architecture
// (XILAGUARD_ENFORCE_ACCEPT_MOCK, XILAGUARD_POOL_LABEL) take precedence
// over the matching field, so that one configuration file serves every
// deployment.
type Args struct {
	// AcceptMock makes the evaluator apply the lab profile, which accepts
	// mock evidence as simulated integration. Default false: production.
	AcceptMock *bool `json:"acceptMock,omitempty"`
	// AnswerReuse is how long PreFilter may reuse the evaluator's answer
	// about a snapshot identical to one it has judged: same profile,
	// tenant, policy version, and nodes with the same UIDs and evidence
	// versions. Bind never reuses an answer. Default 500ms; 0 judges
	// in every cycle.
	AnswerReuse *metav1.Duration `json:"answerReuse,omitempty"`
	// PoolLabel is the node label whose value names a node's pool, and the
	// key of the pool taint; default guard.xila.us/tenant-pool.
	PoolLabel string `json:"poolLabel,omitempty"`
	// AttestationURL is the base URL of the attestation controller's
	// challenge endpoint (docs/attest.md). When set, Bind asks it to
	// attest a node whose attested evidence is refused only for its age or
	// a missing verdict, and judges the node again. Empty: no re-challenge.
	AttestationURL string `json:"attestationURL,omitempty"`
	// ChallengeTimeout bounds a re-challenge; default 1s, at most 10s.
	ChallengeTimeout *metav1.Duration `json:"challengeTimeout,omitempty"`
}

// settings are Args resolved against the environment and the defaults.
type settings struct {
	profile          guard.Profile
	answerReuse      time.Duration
	poolLabel        string
	attestationURL   string
	challengeTimeout time.Duration
}

// resolveSettings applies lookupEnv over args over the defaults and
// validates the result.
func resolveSettings(args Args, lookupEnv func(string) (string, bool)) (settings, error) {
	s := settings{
		profile:          guard.ProfileProduction,
		answerReuse:      DefaultAnswerReuse,
		poolLabel:        guard.LabelTenantPool,
		challengeTimeout: DefaultChallengeTimeout,
	}
	var errs []error
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
	if args.AttestationURL != "" {
		u, err := url.Parse(args.AttestationURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			errs = append(errs, fmt.Errorf("attestationURL %q: want an http or https URL with a host and no query", args.AttestationURL))
		}
		s.attestationURL = args.AttestationURL
	}
	if args.ChallengeTimeout != nil {
		s.challengeTimeout = args.ChallengeTimeout.Duration
	}
	if s.challengeTimeout <= 0 || s.challengeTimeout > MaxChallengeTimeout {
		errs = append(errs, fmt.Errorf("challengeTimeout %s: want more than 0 and at most %s", s.challengeTimeout, MaxChallengeTimeout))
	}
	return s, errors.Join(errs...)
}
