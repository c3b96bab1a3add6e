package main

import (
	"bufio"
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// connWatcher counts the TCP connections made to one port, from the
// client's sockets in /proc/net/tcp: each connection has one, which stays
// listed while it is open and, once the client closes it, for a minute in
// TIME_WAIT, so sampling twice a second sees every connection the API
// server opened to the webhook, however short it was. A new connection is
// a full TLS handshake (the API server's client resumes no sessions).
type connWatcher struct {
	port string // upper-case hex, as /proc/net/tcp writes it
	mu   sync.Mutex
	seen map[string]bool
	open int
}

func watchConns(ctx context.Context, port int) *connWatcher {
	w := &connWatcher{port: strings.ToUpper(strconv.FormatInt(int64(port), 16)), seen: map[string]bool{}}
	for len(w.port) < 4 {
		w.port = "0" + w.port
	}
	w.sample()
	go func() {
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				w.sample()
			}
		}
	}()
	return w
}

// connections samples again and returns how many connections have been
// seen so far, and how many are established now.
func (w *connWatcher) connections() (seen, open int) {
	w.sample()
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.seen), w.open
}

func (w *connWatcher) sample() {
	open := 0
	var found []string
	for _, path := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// sl local_address rem_address st ...
			fields := strings.Fields(sc.Text())
			if len(fields) < 4 || !strings.HasSuffix(fields[2], ":"+w.port) {
				continue
			}
			found = append(found, fields[1])
			if fields[3] == "01" { // ESTABLISHED
				open++
			}
		}
		f.Close()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, local := range found {
		w.seen[local] = true
	}
	w.open = open
}
