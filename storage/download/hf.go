package download

import (
	"net/http"
	"net/url"
	"os"
	"strings"
)

// Hugging Face environment variables, as understood by huggingface_hub.
const (
	HFEndpointEnv = "HF_ENDPOINT" // hub base URL, default https://huggingface.co
	HFTokenEnv    = "HF_TOKEN"    // access token for gated or private repos
)

// HFEndpoint returns $HF_ENDPOINT without a trailing slash, or
// https://huggingface.co.
func HFEndpoint() string {
	if e := strings.TrimRight(os.Getenv(HFEndpointEnv), "/"); e != "" {
		return e
	}
	return "https://huggingface.co"
}

// HFResolveURL returns <endpoint>/<repo>/resolve/<revision>/<file>, the URL
// that redirects to a file's content (revision "" means "main"). Path
// segments are escaped; a revision such as "refs/pr/1" becomes one segment.
func HFResolveURL(repo, file, revision string) string {
	if revision == "" {
		revision = "main"
	}
	return HFEndpoint() + "/" + escapeSegments(repo) + "/resolve/" + url.PathEscape(revision) + "/" + escapeSegments(file)
}

func escapeSegments(p string) string {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return strings.Join(parts, "/")
}

// HFHeader returns request headers for the hub: Authorization from
// $HF_TOKEN when set, else nil. net/http drops it on the redirect to the
// content CDN (another host), which needs no token.
func HFHeader() http.Header {
	tok := os.Getenv(HFTokenEnv)
	if tok == "" {
		return nil
	}
	return http.Header{"Authorization": {"Bearer " + tok}}
}
