package app

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/xila-guard/xila-guard/components/attest/kbs"
)

// DefaultTokenFile is where the chart's examples project the key broker's
// service-account token.
const DefaultTokenFile = "/var/run/secrets/xila-guard/kbs/token"

// clientResult is the JSON line kbs-client prints.
type clientResult struct {
	Resource string `json:"resource"`
	// SHA256 is the digest of the key released; with --print-key, Key is
	// the key itself.
	SHA256 string `json:"sha256,omitempty"`
	Key    string `json:"key,omitempty"`
	// Status and Reason describe a refusal.
	Status int    `json:"status,omitempty"`
	Reason string `json:"reason,omitempty"`
	Error  string `json:"error,omitempty"`
}

// runKBSClient fetches resources from a key broker with the pod's token,
// printing one JSON line per resource; it fails when any is refused. With
// --hold it then keeps running until ctx ends (SIGTERM), so that a pod
// whose main process it is stays up and can run kbs-client again; --hold
// with no resource fetches nothing and only holds.
func runKBSClient(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(Name+" kbs-client", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "", "the key broker's base URL, e.g. http://xila-guard-kbs.xila-guard-system.svc:8082; required")
	tokenFile := fs.String("token-file", DefaultTokenFile, "the projected service-account token (audience xila-guard-kbs)")
	tee := fs.String("tee", "snp", "the TEE the client names: snp or tdx")
	printKey := fs.Bool("print-key", false, "print the key itself, not only its SHA-256")
	timeout := fs.Duration("timeout", 10*time.Second, "bound on the whole exchange")
	hold := fs.Bool("hold", false, "once every resource is released, keep running until SIGTERM (a refusal still exits non-zero at once); with no resource, only hold")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *url == "" || (fs.NArg() == 0 && !*hold) {
		return errors.New("usage: kbs-client --url URL [--hold] repository/type/tag [repository/type/tag ...]")
	}
	if fs.NArg() > 0 {
		token, err := os.ReadFile(*tokenFile)
		if err != nil {
			return fmt.Errorf("--token-file: %w", err)
		}
		if err := fetchResources(ctx, *url, strings.TrimSpace(string(token)), *tee, *timeout, *printKey, fs.Args(), stdout); err != nil || !*hold {
			return err
		}
	}
	<-ctx.Done()
	return nil
}

// fetchResources runs one session, bounded by timeout, printing one JSON
// line per resource; it fails when any is refused.
func fetchResources(ctx context.Context, url, token, tee string, timeout time.Duration, printKey bool, paths []string, stdout io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	c := &kbs.Client{URL: url, HTTP: &http.Client{}, TEE: tee}
	enc := json.NewEncoder(stdout)
	sess, err := attestRetrying(ctx, c, token, key)
	if err != nil {
		_ = enc.Encode(refusal(strings.Join(paths, ","), err))
		return err
	}
	var failed error
	for _, path := range paths {
		k, err := sess.Resource(ctx, path)
		if err != nil {
			_ = enc.Encode(refusal(path, err))
			failed = errors.Join(failed, err)
			continue
		}
		sum := sha256.Sum256(k)
		out := clientResult{Resource: path, SHA256: hex.EncodeToString(sum[:])}
		if printKey {
			out.Key = string(k)
		}
		_ = enc.Encode(out)
	}
	return failed
}

func refusal(path string, err error) clientResult {
	out := clientResult{Resource: path, Error: err.Error()}
	var r *kbs.RefusedError
	if errors.As(err, &r) {
		out.Status, out.Reason = r.Status, r.Problem.Reason
	}
	return out
}

// attestRetrying attests, trying again while the broker answers 503 (it
// could not decide yet, e.g. the pod's IP is not on record) until ctx ends.
func attestRetrying(ctx context.Context, c *kbs.Client, token string, key *ecdsa.PrivateKey) (*kbs.Session, error) {
	for {
		sess, err := c.Attest(ctx, token, key)
		var r *kbs.RefusedError
		if err == nil || !errors.As(err, &r) || r.Status != http.StatusServiceUnavailable {
			return sess, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(500 * time.Millisecond):
		}
	}
}
