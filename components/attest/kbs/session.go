package kbs

import (
	"crypto/rand"
	"encoding/base64"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"k8s.io/apimachinery/pkg/types"
)

// session is one client's state, from auth to its last resource request.
type session struct {
	id      string
	nonce   string
	tee     string
	expires time.Time

	// Set by a successful attest.
	attested bool
	who      *identity
	pubKey   *jose.JSONWebKey
	alg      jose.KeyAlgorithm
}

// identity is who a verified token names.
type identity struct {
	namespace      string
	pod            string
	podUID         types.UID
	serviceAccount string
	node           string
	nodeUID        types.UID
}

// pendingTTL bounds the life of a session that has not attested.
const pendingTTL = 30 * time.Second

// sessions holds the live sessions, at most max of them.
type sessions struct {
	mu  sync.Mutex
	m   map[string]*session
	max int
}

func newSessions(max int) *sessions { return &sessions{m: map[string]*session{}, max: max} }

// open starts a session, or returns nil when max sessions are live.
func (s *sessions) open(tee string, now time.Time, ttl time.Duration) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.m) >= s.max {
		for id, old := range s.m {
			if !now.Before(old.expires) {
				delete(s.m, id)
			}
		}
		if len(s.m) >= s.max {
			return nil
		}
	}
	// Until it attests, a session lives at most pendingTTL, so that
	// sessions opened and left cannot fill the table for long.
	sess := &session{id: random(), nonce: random(), tee: tee, expires: now.Add(min(ttl, pendingTTL))}
	s.m[sess.id] = sess
	return sess
}

// get returns a copy of the live session with the ID, or false.
func (s *sessions) get(id string, now time.Time) (session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.m[id]
	if !ok {
		return session{}, false
	}
	if !now.Before(sess.expires) {
		delete(s.m, id)
		return session{}, false
	}
	return *sess, true
}

// attest records a session's verified identity and key. A session attests
// once; a second attempt is refused so that a session cannot change hands.
func (s *sessions) attest(id string, who *identity, key *jose.JSONWebKey, alg jose.KeyAlgorithm, expires time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.m[id]
	if !ok || sess.attested {
		return false
	}
	sess.attested, sess.who, sess.pubKey, sess.alg, sess.expires = true, who, key, alg, expires
	return true
}

// dropUnattested ends a session that has not attested.
func (s *sessions) dropUnattested(id string) {
	s.mu.Lock()
	if sess, ok := s.m[id]; ok && !sess.attested {
		delete(s.m, id)
	}
	s.mu.Unlock()
}

// len returns the number of sessions held, expired ones included until
// they are swept.
func (s *sessions) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// random returns 32 random bytes in base64url without padding.
func random() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return base64.RawURLEncoding.EncodeToString(b)
}
