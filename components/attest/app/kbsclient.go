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
// printing one JSON line per resource; it fails when any is refused.
func runKBSClient(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(Name+" kbs-client", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "", "the key broker's base URL, e.g. http://xila-guard-kbs.xila-guard-system.svc:8082; required")
	tokenFile := fs.String("token-file", DefaultTokenFile, "the projected service-account token (audience xila-guard-kbs)")
	tee := fs.String("tee", "snp", "the TEE the client names: snp or tdx")
	printKey := fs.Bool("print-key", false, "print the key itself, not only its SHA-256")
	timeout := fs.Duration("timeout", 10*time.Second, "bound on the whole exchange")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *url == "" || fs.NArg() == 0 {
		return errors.New("usage: kbs-client --url URL <repository/type/tag>...")
	}
	token, err := os.ReadFile(*tokenFile)
	if err != nil {
		return fmt.Errorf("--token-file: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	c := &kbs.Client{URL: *url, HTTP: &http.Client{}, TEE: *tee}
	enc := json.NewEncoder(stdout)
	sess, err := c.Attest(ctx, strings.TrimSpace(string(token)), key)
	if err != nil {
		_ = enc.Encode(refusal(strings.Join(fs.Args(), ","), err))
		return err
	}
	var failed error
	for _, path := range fs.Args() {
		k, err := sess.Resource(ctx, path)
		if err != nil {
			_ = enc.Encode(refusal(path, err))
			failed = errors.Join(failed, err)
			continue
		}
		sum := sha256.Sum256(k)
		out := clientResult{Resource: path, SHA256: hex.EncodeToString(sum[:])}
		if *printKey {
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
