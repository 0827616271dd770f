package adminapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// GetJSON decodes the JSON answer of GET url, read up to limit bytes, into
// v. An answer other than 200 is an error with the status and the start of
// the body.
func GetJSON(ctx context.Context, c *http.Client, url string, limit int64, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: status %d: %.200s", url, resp.StatusCode, body)
	}
	return json.Unmarshal(body, v)
}

// Post sends POST url with an empty body (an admin or debug action) and
// expects the status want.
func Post(ctx context.Context, c *http.Client, url string, want int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, http.NoBody)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != want {
		return fmt.Errorf("POST %s: status %d, want %d", url, resp.StatusCode, want)
	}
	return nil
}
