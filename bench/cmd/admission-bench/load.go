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

// generator sends pod CREATEs to the API server over many connections,
// each HTTP/2 as client-go's, round robin, so that requests in flight
// share connections and bursts open none. Pods are sent as a controller
// sends them: in protobuf, named by generateName.
type generator struct {
	clients []*http.Client
	host    string
	token   string
	// bodies are each namespace's pod, encoded.
	namespaces []string
	bodies     [][]byte
	dials      atomic.Int64
}

const contentTypeProtobuf = "application/vnd.kubernetes.protobuf"

func newGenerator(c *cluster, tenants, conns int) (*generator, error) {
	g := &generator{host: strings.TrimSuffix(c.Config.Host, "/"), token: c.Config.BearerToken}
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	for range conns {
		tlsCfg, err := rest.TLSConfigFor(c.Config)
		if err != nil {
			return nil, err
		}
		t := &http.Transport{
			TLSClientConfig:     tlsCfg,
			TLSHandshakeTimeout: 10 * time.Second,
			ForceAttemptHTTP2:   true,
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				g.dials.Add(1)
				return dialer.DialContext(ctx, network, addr)
			},
		}
		g.clients = append(g.clients, &http.Client{Transport: t, Timeout: 60 * time.Second})
	}
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
	resp, err := g.clients[i%len(g.clients)].Do(req)
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

// connect opens every connection, so that none is opened while measuring.
func (g *generator) connect(ctx context.Context) error {
	for _, c := range g.clients {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.host+"/readyz", nil)
		if err != nil {
			return err
		}
		if g.token != "" {
			req.Header.Set("Authorization", "Bearer "+g.token)
		}
		resp, err := c.Do(req)
		if err != nil {
			return fmt.Errorf("connecting to the API server: %w", err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.ProtoMajor != 2 {
			return fmt.Errorf("the API server answered over %s, want HTTP/2", resp.Proto)
		}
	}
	return nil
}
