package resource

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Client is a Resource served by a Server, over HTTP.
type Client struct {
	base string
	http *http.Client
}

// NewClient returns a client of the resource at addr. Requests that take
// longer than timeout have an unknown outcome.
func NewClient(addr string, timeout time.Duration) *Client {
	return &Client{
		base: "http://" + addr,
		http: &http.Client{Timeout: timeout, Transport: &http.Transport{MaxIdleConnsPerHost: 2}},
	}
}

// Read reads a key.
func (c *Client) Read(ctx context.Context, r ReadRequest) (ReadReply, error) {
	var out ReadReply
	return out, c.post(ctx, "/read", r, &out)
}

// Write writes a key.
func (c *Client) Write(ctx context.Context, r WriteRequest) (WriteReply, error) {
	var out WriteReply
	return out, c.post(ctx, "/write", r, &out)
}

// NextFence draws the next fence of a key's sequence.
func (c *Client) NextFence(ctx context.Context, r FenceRequest) (FenceReply, error) {
	var out FenceReply
	return out, c.post(ctx, "/next-fence", r, &out)
}

func (c *Client) post(ctx context.Context, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("resource %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
