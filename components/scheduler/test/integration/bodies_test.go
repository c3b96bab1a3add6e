//go:build integration

package integration

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
)

func readAll(resp *http.Response) ([]byte, error) {
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

func setBody(resp *http.Response, body []byte) {
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
}

func lastIndex(s, sep []byte) int { return bytes.LastIndex(s, sep) }
