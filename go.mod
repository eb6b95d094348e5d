module github.com/cortiq/cortiq

go 1.26.0

require (
	github.com/ardanlabs/jinja v1.8.0
	github.com/chromedp/cdproto v0.159.0
	github.com/chromedp/chromedp v0.23.0
	github.com/cogentcore/webgpu v0.23.0
	github.com/dlclark/regexp2 v1.12.0
	github.com/ebitengine/purego v0.11.3
	github.com/gorilla/websocket v1.5.3
	github.com/hack-pad/hackpadfs v0.2.4
	golang.org/x/sys v0.50.0
	golang.org/x/text v0.23.0
)

require github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
