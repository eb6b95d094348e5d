package download

import (
	"net/http"
	"net/url"
	"strings"
)

// Hugging Face environment variables, as understood by huggingface_hub. The
// package reads no environment: the CLI reads these and fills a Hub.
const (
	HFEndpointEnv = "HF_ENDPOINT" // hub base URL, default https://huggingface.co
	HFTokenEnv    = "HF_TOKEN"    // access token for gated or private repos
)

// DefaultHFEndpoint is the hub's base URL when Hub.Endpoint is empty.
const DefaultHFEndpoint = "https://huggingface.co"

// Hub is a Hugging Face hub: its base URL and an access token. The zero
// value is the public hub without a token.
type Hub struct {
	Endpoint string // base URL ("" = DefaultHFEndpoint); a trailing slash is ignored
	Token    string // access token for gated or private repos ("" = none)
}

// BaseURL returns the endpoint without a trailing slash, or
// DefaultHFEndpoint.
func (h Hub) BaseURL() string {
	if e := strings.TrimRight(h.Endpoint, "/"); e != "" {
		return e
	}
	return DefaultHFEndpoint
}

// ResolveURL returns <endpoint>/<repo>/resolve/<revision>/<file>, the URL
// that redirects to a file's content (revision "" means "main"). Path
// segments are escaped; a revision such as "refs/pr/1" becomes one segment.
func (h Hub) ResolveURL(repo, file, revision string) string {
	if revision == "" {
		revision = "main"
	}
	return h.BaseURL() + "/" + escapeSegments(repo) + "/resolve/" + url.PathEscape(revision) + "/" + escapeSegments(file)
}

func escapeSegments(p string) string {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return strings.Join(parts, "/")
}

// Header returns request headers for the hub: Authorization from Token
// when set, else nil. net/http drops it on the redirect to the content CDN
// (another host), which needs no token.
func (h Hub) Header() http.Header {
	if h.Token == "" {
		return nil
	}
	return http.Header{"Authorization": {"Bearer " + h.Token}}
}
