package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/xila-guard/xila-guard/bench/internal/fixture"
)

// generator sends pod CREATEs to the API server, each on a connection of
// its own (HTTP/1.1, as many connections as requests in flight, kept
// open between requests), so that no request waits for another on the
// client side. Pods are sent as a controller sends them: in protobuf,
// named by generateName.
type generator struct {
	client *http.Client
	host   string
	token  string
	// bodies are each namespace's pod, encoded.
	namespaces []string
	bodies     [][]byte
	dials      atomic.Int64
}

const contentTypeProtobuf = "application/vnd.kubernetes.protobuf"

func newGenerator(c *cluster, tenants int) (*generator, error) {
	tlsCfg, err := rest.TLSConfigFor(c.cfg)
	if err != nil {
		return nil, err
	}
	tlsCfg.NextProtos = []string{"http/1.1"}
	g := &generator{host: strings.TrimSuffix(c.cfg.Host, "/"), token: c.cfg.BearerToken}
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	t := &http.Transport{
		TLSClientConfig:     tlsCfg,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 4096,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			g.dials.Add(1)
			return dialer.DialContext(ctx, network, addr)
		},
	}
	g.client = &http.Client{Transport: t, Timeout: 60 * time.Second}
	enc := protobuf.NewSerializer(clientgoscheme.Scheme, clientgoscheme.Scheme)
	for i := range tenants {
		ns := tenantID(i)
		p := fixture.Pod(ns, false)
		p.Name = ""
		var body bytes.Buffer
		if err := enc.Encode(p, &body); err != nil {
			return nil, fmt.Errorf("encoding the pod: %w", err)
		}
		g.namespaces = append(g.namespaces, ns)
		g.bodies = append(g.bodies, body.Bytes())
	}
	return g, nil
}

// create sends CREATE number i, in the i-th tenant's namespace round
// robin, and checks that it was admitted (201).
func (g *generator) create(ctx context.Context, i int, dryRun bool) error {
	n := i % len(g.namespaces)
	url := g.host + "/api/v1/namespaces/" + g.namespaces[n] + "/pods"
	if dryRun {
		url += "?dryRun=All"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(g.bodies[n]))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", contentTypeProtobuf)
	req.Header.Set("Accept", contentTypeProtobuf)
	if g.token != "" {
		req.Header.Set("Authorization", "Bearer "+g.token)
	}
	resp, err := g.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("status %d: %.300q", resp.StatusCode, out)
	}
	return nil
}

// prewarm opens n connections to the API server and leaves them idle in
// the pool, so that a measurement's bursts find a connection open rather
// than wait for a handshake: n watches held for a second, all at once.
func (g *generator) prewarm(ctx context.Context, n int) error {
	errs := make(chan error, n)
	for range n {
		go func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet,
				g.host+"/api/v1/namespaces/"+g.namespaces[0]+"/pods?watch=true&timeoutSeconds=1", nil)
			if err != nil {
				errs <- err
				return
			}
			if g.token != "" {
				req.Header.Set("Authorization", "Bearer "+g.token)
			}
			resp, err := g.client.Do(req)
			if err != nil {
				errs <- err
				return
			}
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			errs <- err
		}()
	}
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return fmt.Errorf("opening the generator's connections: %w", first)
	}
	return nil
}
